import os

from compaction import PostgresSessionStore, SQLiteSessionStore

url = os.environ.get("DATABASE_URL")  # e.g. postgresql://compaction:secret@db:5432/compaction
store = PostgresSessionStore(url, pool_size=10) if url else SQLiteSessionStore(":memory:")
store.create_session("s1", system="You are terse.", model="gpt-4o")
ids = store.append("s1", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
print(len(store.context("s1").messages))  # 2
store.close()
