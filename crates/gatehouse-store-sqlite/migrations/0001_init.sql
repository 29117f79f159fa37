-- Gatehouse schema, SQLite. Times are Unix milliseconds (D4); every tenant
-- table carries org_id and every index on one leads with it (D2).

CREATE TABLE organizations (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    plan        TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'enterprise')),
    per_minute  INTEGER,
    per_second  INTEGER,
    v2_preview  INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
) STRICT;

-- `seq` is the stable rowid the full-text index refers to (an implicit rowid
-- may change on VACUUM).
CREATE TABLE users (
    seq            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    org_id         TEXT NOT NULL REFERENCES organizations(id),
    email          TEXT NOT NULL,
    email_norm     TEXT NOT NULL,
    name           TEXT NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('admin', 'editor', 'viewer')),
    status         TEXT NOT NULL CHECK (status IN ('active', 'inactive', 'pending_invite')),
    password_hash  TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    UNIQUE (org_id, email_norm)
) STRICT;

-- D14: the list order, alone and under each filter.
CREATE INDEX users_by_created ON users (org_id, created_at DESC, id DESC);
CREATE INDEX users_by_role ON users (org_id, role, created_at DESC, id DESC);
CREATE INDEX users_by_status ON users (org_id, status, created_at DESC, id DESC);
CREATE INDEX users_by_role_status ON users (org_id, role, status, created_at DESC, id DESC);

-- D14: substring search on name and email through a trigram index.
CREATE VIRTUAL TABLE users_fts USING fts5 (
    name, email, content = 'users', content_rowid = 'seq', tokenize = 'trigram'
);

-- D14: exact totals without counting rows: one counter per (org, role, status).
CREATE TABLE user_counts (
    org_id  TEXT NOT NULL,
    role    TEXT NOT NULL,
    status  TEXT NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (org_id, role, status)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER users_ai AFTER INSERT ON users BEGIN
    INSERT INTO users_fts (rowid, name, email) VALUES (new.seq, new.name, new.email);
    INSERT INTO user_counts (org_id, role, status, n) VALUES (new.org_id, new.role, new.status, 1)
        ON CONFLICT (org_id, role, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER users_ad AFTER DELETE ON users BEGIN
    INSERT INTO users_fts (users_fts, rowid, name, email) VALUES ('delete', old.seq, old.name, old.email);
    UPDATE user_counts SET n = n - 1
        WHERE org_id = old.org_id AND role = old.role AND status = old.status;
END;

CREATE TRIGGER users_au_text AFTER UPDATE OF name, email ON users BEGIN
    INSERT INTO users_fts (users_fts, rowid, name, email) VALUES ('delete', old.seq, old.name, old.email);
    INSERT INTO users_fts (rowid, name, email) VALUES (new.seq, new.name, new.email);
END;

CREATE TRIGGER users_au_count AFTER UPDATE OF role, status ON users BEGIN
    UPDATE user_counts SET n = n - 1
        WHERE org_id = old.org_id AND role = old.role AND status = old.status;
    INSERT INTO user_counts (org_id, role, status, n) VALUES (new.org_id, new.role, new.status, 1)
        ON CONFLICT (org_id, role, status) DO UPDATE SET n = n + 1;
END;

CREATE TABLE products (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    org_id      TEXT NOT NULL REFERENCES organizations(id),
    name        TEXT NOT NULL,
    sku         TEXT NOT NULL COLLATE NOCASE,
    price       INTEGER NOT NULL CHECK (price >= 0),
    stock       INTEGER NOT NULL CHECK (stock >= 0),
    status      TEXT NOT NULL CHECK (status IN ('available', 'out_of_stock', 'discontinued')),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (org_id, sku)
) STRICT;

CREATE INDEX products_by_created ON products (org_id, created_at DESC, id DESC);
CREATE INDEX products_by_status ON products (org_id, status, created_at DESC, id DESC);

-- D17: word-prefix search on name and sku.
CREATE VIRTUAL TABLE products_fts USING fts5 (
    name, sku, content = 'products', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 0', prefix = '1 2 3'
);

CREATE TABLE product_counts (
    org_id  TEXT NOT NULL,
    status  TEXT NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (org_id, status)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER products_ai AFTER INSERT ON products BEGIN
    INSERT INTO products_fts (rowid, name, sku) VALUES (new.seq, new.name, new.sku);
    INSERT INTO product_counts (org_id, status, n) VALUES (new.org_id, new.status, 1)
        ON CONFLICT (org_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER products_ad AFTER DELETE ON products BEGIN
    INSERT INTO products_fts (products_fts, rowid, name, sku) VALUES ('delete', old.seq, old.name, old.sku);
    UPDATE product_counts SET n = n - 1 WHERE org_id = old.org_id AND status = old.status;
END;

CREATE TRIGGER products_au_text AFTER UPDATE OF name, sku ON products BEGIN
    INSERT INTO products_fts (products_fts, rowid, name, sku) VALUES ('delete', old.seq, old.name, old.sku);
    INSERT INTO products_fts (rowid, name, sku) VALUES (new.seq, new.name, new.sku);
END;

CREATE TRIGGER products_au_count AFTER UPDATE OF status ON products BEGIN
    UPDATE product_counts SET n = n - 1 WHERE org_id = old.org_id AND status = old.status;
    INSERT INTO product_counts (org_id, status, n) VALUES (new.org_id, new.status, 1)
        ON CONFLICT (org_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TABLE clients (
    id                     TEXT PRIMARY KEY,
    org_id                 TEXT NOT NULL REFERENCES organizations(id),
    name                   TEXT NOT NULL,
    secret_hash            BLOB,
    previous_secret_hash   BLOB,
    previous_secret_until  INTEGER,
    scopes                 INTEGER NOT NULL,
    redirect_uris          TEXT NOT NULL,
    admin_approved         INTEGER NOT NULL DEFAULT 0,
    owner_id               TEXT REFERENCES users(id),
    created_at             INTEGER NOT NULL
) STRICT;

CREATE INDEX clients_by_owner ON clients (org_id, owner_id) WHERE owner_id IS NOT NULL;

CREATE TABLE signing_keys (
    kid                    TEXT PRIMARY KEY,
    private_key_encrypted  BLOB NOT NULL,
    public_key             BLOB NOT NULL,
    created_at             INTEGER NOT NULL,
    activates_at           INTEGER NOT NULL,
    expires_at             INTEGER
) STRICT;
