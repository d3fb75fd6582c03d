-- What each valuation was asked with, and where that came from (issue 26): besides the state, mileage (and its
-- unit) and condition sent, where the mileage came from and the market whose unit it is in. A revaluation at
-- another mileage is then told apart from the world's value moving (sql/changes/market_values.sql).
-- Valuations landed before this were not recorded with it: NULL (unknown), never guessed.
ALTER TABLE market_values ADD COLUMN mileage_source VARCHAR;  -- fleet_file | history; NULL when no mileage was sent
ALTER TABLE market_values ADD COLUMN country VARCHAR;         -- US | CA: the market the mileage's unit follows
