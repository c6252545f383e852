"""Tools: the @tool decorator, the tool protocol and the context a tool receives."""
