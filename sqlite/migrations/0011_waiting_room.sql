-- A sale's waiting room (issue 24): its settings as JSON
-- ({"prequeue_minutes":...,"admit_per_second":...,"admission_seconds":...}),
-- '' for none, which every sale created before it has.
ALTER TABLE sales ADD COLUMN waiting_room TEXT NOT NULL DEFAULT '';
