-- Stepped prices (issue 10): "rooms:price,..." per room-night, '' for none.
ALTER TABLE sales ADD COLUMN IF NOT EXISTS price_tiers VARCHAR(400) NOT NULL DEFAULT '';
