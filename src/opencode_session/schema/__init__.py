"""Public shapes and durable events as pydantic models; imports pydantic only."""
