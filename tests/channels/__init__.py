"""Answering from anywhere: one-time links, Slack, MCP clients and the protocol doors (issue 39)."""
