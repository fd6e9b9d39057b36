"""Summarizer backends behind one small protocol."""
