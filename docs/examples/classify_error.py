from guards import ErrorKind, classify_error

cohere = {
    "message": "too many tokens: size limit exceeded by 19296 tokens. Try using shorter or fewer inputs. "
    "The limit for this model is 132000 tokens.",
    "status_code": 400,
}
groq = {
    "error": {
        "message": "Request too large for model `llama-3.3-70b-versatile` in organization `org_x` service "
        "tier `on_demand` on tokens per minute (TPM): Limit 6000, Requested 14810, please reduce your message size "
        "and try again.",
        "type": "tokens",
        "code": "rate_limit_exceeded",
    },
    "status_code": 413,
}
c = classify_error(cohere)
assert (c.kind, c.allowed_tokens, c.excess_tokens) == (ErrorKind.CONTEXT_OVERFLOW, 132_000, 19_296)
assert classify_error(groq).kind is ErrorKind.RATE_LIMIT
print(c.matched, "/", classify_error(groq).matched)
