"""gemini"""
