-- One search (issue 25, item 3). `q` on users and products is answered by
-- the in-memory index alone (`gatehouse_app::search`, fed by
-- `search_changes`, migration 12); no query reads the trigram and tsvector
-- indexes any more, and every write paid for keeping them. Drop them.
DROP INDEX IF EXISTS users_search;
DROP INDEX IF EXISTS products_search;

-- The columns they indexed (`users.name_fold`, `products.words`) are no
-- longer written by this release. They stay one more release, nullable,
-- because a node of the previous release still writes them during a rolling
-- upgrade (schema changes are additive between adjacent versions,
-- docs/deployment.md); a later migration drops them. Without an index on
-- them they cost a write nothing but their bytes.
ALTER TABLE users ALTER COLUMN name_fold DROP NOT NULL;
ALTER TABLE products ALTER COLUMN words DROP NOT NULL;

-- The pg_trgm and btree_gin extensions (migration 1) are left installed:
-- nothing of Gatehouse uses them now, but another user of the database
-- might, and dropping one needs its owner's rights.
