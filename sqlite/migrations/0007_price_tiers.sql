-- Stepped prices (issue 10): "rooms:price,..." per room-night, '' for none.
ALTER TABLE sales ADD COLUMN price_tiers TEXT NOT NULL DEFAULT '';
