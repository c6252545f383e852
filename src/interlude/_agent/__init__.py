"""The agent and its loop."""
