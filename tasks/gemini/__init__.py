"""The Gemini boundary: the SDK client and its error mapping, the describer, the image maker, the rate limiter."""
