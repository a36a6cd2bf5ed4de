-- A sale's stay rules per night (issue 25): a JSON object of the nights
-- that have any rule, keyed by date
-- ({"2026-12-24":{"min_stay":2},"2026-12-25":{"stop_sell":true}}), so it
-- never misaligns with the nights; '' when no night has one, which every
-- sale created before it has.
ALTER TABLE sales ADD COLUMN stay_rules TEXT NOT NULL DEFAULT '';
