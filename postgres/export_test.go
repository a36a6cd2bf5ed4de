package postgres

// NoticeLockKey is the outbox's advisory lock key, for the tests that hold it.
const NoticeLockKey = noticeLockKey
