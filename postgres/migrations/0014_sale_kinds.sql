-- A sale's kind and its slots' times (issue 25). kind is the Kind as
-- written, '' for a sale from before kinds, which is a stay. A slot sale
-- has several units on one date (a restaurant's three services), each
-- with its start in the venue's zone ('19:00'; start_time, since time
-- names a type) and its length in minutes (0 for none); a stay's night
-- has '' and 0, as every night from before. The nights' key is
-- (sale_id, idx), never the date, so a date may repeat.
ALTER TABLE sales ADD COLUMN IF NOT EXISTS kind VARCHAR(16) NOT NULL DEFAULT '';
ALTER TABLE nights ADD COLUMN IF NOT EXISTS start_time VARCHAR(5) NOT NULL DEFAULT '';
ALTER TABLE nights ADD COLUMN IF NOT EXISTS minutes INTEGER NOT NULL DEFAULT 0;
