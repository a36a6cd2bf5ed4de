-- The hotel's time zone (an IANA name; '' for none), where a night's date
-- is a civil date.
ALTER TABLE sales ADD COLUMN time_zone TEXT NOT NULL DEFAULT '';
