-- A sale's kind and its slots' times (issue 25). kind is the Kind as
-- written, '' for a sale from before kinds, which is a stay. A slot sale
-- has several units on one date (a restaurant's three services), each
-- with its start in the venue's zone ('19:00') and its length in minutes
-- (0 for none); a stay's night has '' and 0, as every night from before.
-- The nights' key is (sale_id, idx), never the date, so a date may
-- repeat.
ALTER TABLE sales ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE nights ADD COLUMN start_time TEXT NOT NULL DEFAULT '';
ALTER TABLE nights ADD COLUMN minutes INTEGER NOT NULL DEFAULT 0;
