-- The hotel's time zone (an IANA name; '' for none), where a night's date
-- is a civil date.
ALTER TABLE sales ADD COLUMN IF NOT EXISTS time_zone VARCHAR(64) NOT NULL DEFAULT '';
