-- Gatehouse schema, PostgreSQL: the tenant data. It mirrors the SQLite schema
-- (crates/gatehouse-store-sqlite/migrations) so both backends behave alike:
--
-- * Times are Unix milliseconds in `bigint`, exactly what `Timestamp` holds
--   (D4); nothing is converted on the way in or out.
-- * Ids are the prefixed text ids (D3) in the "C" collation, so they compare
--   as byte strings, as D14's tie-break and the SQLite backend do.
-- * Every tenant table carries org_id and every index on one leads with it
--   (D2); GIN indexes lead with it through btree_gin.
-- * Values that must compare case-insensitively are folded by the store with
--   Rust's Unicode lower-casing (`email_norm`, `name_fold`) rather than with
--   lower(), whose result depends on the database's locale: uniqueness and
--   search then mean the same on every server as on SQLite.

-- D14: substring search through trigrams. Both extensions are "trusted"
-- (PostgreSQL 13+): the database owner may create them, no superuser needed.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE TABLE organizations (
    id          text COLLATE "C" PRIMARY KEY,
    name        text NOT NULL,
    plan        text NOT NULL CHECK (plan IN ('free', 'pro', 'enterprise')),
    per_minute  bigint,
    per_second  bigint,
    v2_preview  boolean NOT NULL DEFAULT false,
    created_at  bigint NOT NULL
);

CREATE TABLE users (
    id             text COLLATE "C" PRIMARY KEY,
    org_id         text COLLATE "C" NOT NULL REFERENCES organizations (id),
    email          text NOT NULL,
    -- `Email::normalized()`: the unique key and the login look-up.
    email_norm     text NOT NULL,
    -- The name lower-cased the same way, for D14's search.
    name_fold      text NOT NULL,
    name           text NOT NULL,
    role           text NOT NULL CHECK (role IN ('admin', 'editor', 'viewer')),
    status         text NOT NULL CHECK (status IN ('active', 'inactive', 'pending_invite')),
    password_hash  text,
    created_at     bigint NOT NULL,
    updated_at     bigint NOT NULL,
    -- Case-insensitive unique e-mail per organization (D10); the store maps
    -- a violation of this name to `Duplicate("email")`.
    CONSTRAINT users_org_email_key UNIQUE (org_id, email_norm)
);

-- D14: the list order, alone and under each filter, so a page is an index
-- range scan.
CREATE INDEX users_by_created ON users (org_id, created_at DESC, id DESC);
CREATE INDEX users_by_role ON users (org_id, role, created_at DESC, id DESC);
CREATE INDEX users_by_status ON users (org_id, status, created_at DESC, id DESC);
CREATE INDEX users_by_role_status ON users (org_id, role, status, created_at DESC, id DESC);

-- D14: `q` is a literal, case-insensitive substring of name or e-mail:
-- `name_fold LIKE '%…%' OR email_norm LIKE '%…%'` (with `%`, `_` and `\`
-- escaped) is answered from this trigram index, one bitmap scan per column.
CREATE INDEX users_search ON users
    USING gin (org_id, name_fold gin_trgm_ops, email_norm gin_trgm_ops);

-- D14: exact totals without counting rows: one counter per (org, role,
-- status), kept by the statement-level triggers below in the writing
-- transaction. Statement-level with transition tables: a statement touching
-- many rows (a bulk load, a staging reset) updates each counter once, not once
-- per row, and counters are upserted in key order, so two transactions can
-- never lock two counters in opposite orders (no deadlock).
CREATE TABLE user_counts (
    org_id  text COLLATE "C" NOT NULL,
    role    text NOT NULL,
    status  text NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (org_id, role, status)
);

CREATE FUNCTION users_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO user_counts AS c (org_id, role, status, n)
        SELECT org_id, role, status, count(*) FROM new_rows
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (org_id, role, status) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO user_counts AS c (org_id, role, status, n)
        SELECT org_id, role, status, -count(*) FROM old_rows
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (org_id, role, status) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO user_counts AS c (org_id, role, status, n)
        SELECT org_id, role, status, sum(d) FROM (
            SELECT org_id, role, status, -1 AS d FROM old_rows
            UNION ALL
            SELECT org_id, role, status, 1 FROM new_rows
        ) moved
        GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
        ON CONFLICT (org_id, role, status) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;

-- (PostgreSQL allows transition tables only on single-event triggers.)
CREATE TRIGGER users_count_insert AFTER INSERT ON users
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION users_count();
CREATE TRIGGER users_count_delete AFTER DELETE ON users
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION users_count();
CREATE TRIGGER users_count_update AFTER UPDATE ON users
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION users_count();

CREATE TABLE products (
    id          text COLLATE "C" PRIMARY KEY,
    org_id      text COLLATE "C" NOT NULL REFERENCES organizations (id),
    name        text NOT NULL,
    sku         text NOT NULL,
    price       bigint NOT NULL CHECK (price >= 0),
    stock       bigint NOT NULL CHECK (stock >= 0),
    status      text NOT NULL CHECK (status IN ('available', 'out_of_stock', 'discontinued')),
    -- D17: the words of name and sku (runs of letters and digits,
    -- lower-cased: `gatehouse_domain::values::words`), computed by the store
    -- and stored verbatim through array_to_tsvector (no text-search parser,
    -- no stemming), so a word means the same as on SQLite.
    words       tsvector NOT NULL,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL
);

-- SKUs are ASCII (D8): lower() folds them the same under every locale, as
-- SQLite's NOCASE does. A violation maps to `Duplicate("sku")`.
CREATE UNIQUE INDEX products_org_sku_key ON products (org_id, lower(sku));

CREATE INDEX products_by_created ON products (org_id, created_at DESC, id DESC);
CREATE INDEX products_by_status ON products (org_id, status, created_at DESC, id DESC);

-- D17: every query word a prefix of a stored word: `words @@ 'w1':* & 'w2':*`.
CREATE INDEX products_search ON products USING gin (org_id, words);

CREATE TABLE product_counts (
    org_id  text COLLATE "C" NOT NULL,
    status  text NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (org_id, status)
);

-- Kept like user_counts.
CREATE FUNCTION products_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO product_counts AS c (org_id, status, n)
        SELECT org_id, status, count(*) FROM new_rows
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (org_id, status) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO product_counts AS c (org_id, status, n)
        SELECT org_id, status, -count(*) FROM old_rows
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (org_id, status) DO UPDATE SET n = c.n + excluded.n;
    ELSE
        INSERT INTO product_counts AS c (org_id, status, n)
        SELECT org_id, status, sum(d) FROM (
            SELECT org_id, status, -1 AS d FROM old_rows
            UNION ALL
            SELECT org_id, status, 1 FROM new_rows
        ) moved
        GROUP BY 1, 2 HAVING sum(d) <> 0 ORDER BY 1, 2
        ON CONFLICT (org_id, status) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER products_count_insert AFTER INSERT ON products
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION products_count();
CREATE TRIGGER products_count_delete AFTER DELETE ON products
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION products_count();
CREATE TRIGGER products_count_update AFTER UPDATE ON products
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION products_count();

CREATE TABLE clients (
    id                     text COLLATE "C" PRIMARY KEY,
    org_id                 text COLLATE "C" NOT NULL REFERENCES organizations (id),
    name                   text NOT NULL,
    secret_hash            bytea,
    previous_secret_hash   bytea,
    previous_secret_until  bigint,
    scopes                 smallint NOT NULL,
    redirect_uris          text[] NOT NULL,
    admin_approved         boolean NOT NULL DEFAULT false,
    owner_id               text COLLATE "C" REFERENCES users (id),
    created_at             bigint NOT NULL
);

-- D13's owned-resources check, and the foreign-key check PostgreSQL runs
-- when a user is deleted (by owner_id alone, hence not led by org_id; user
-- ids are globally unique).
CREATE INDEX clients_by_owner ON clients (owner_id) WHERE owner_id IS NOT NULL;

-- Global, not tenant data (D23).
CREATE TABLE signing_keys (
    kid                    text COLLATE "C" PRIMARY KEY,
    private_key_encrypted  bytea NOT NULL,
    public_key             bytea NOT NULL,
    created_at             bigint NOT NULL,
    activates_at           bigint NOT NULL,
    expires_at             bigint
);

-- D27: static API keys, stored as SHA-256 digests.
CREATE TABLE api_keys (
    id          text COLLATE "C" PRIMARY KEY,
    org_id      text COLLATE "C" NOT NULL REFERENCES organizations (id),
    name        text NOT NULL,
    digest      bytea NOT NULL UNIQUE,
    scopes      smallint NOT NULL,
    created_at  bigint NOT NULL,
    revoked_at  bigint
);

CREATE INDEX api_keys_by_org ON api_keys (org_id, created_at);
