from compaction.redact import redact_secrets

text, count = redact_secrets(
    "curl -u admin:hunter22 https://api.example.com/v1 && mysql -h db -u root -phunter22 app\n"
    '{"DATABASE_URL": "postgres:\\/\\/app:hunter22@db.internal:5432\\/app"}'
)
print(text)
assert count == 3
assert "hunter22" not in text
