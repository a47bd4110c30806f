"""The OpenAI-compatible boundary: the `openai` SDK client and its error mapping, the describer on any Chat
Completions endpoint."""
