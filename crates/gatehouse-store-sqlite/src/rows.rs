//! Strict row decoding (a value no record can hold is a corrupt row, never
//! a default) and the column lists the aggregates read.

use super::*;

/// A stored value no row can hold (an unknown enum text, a digest of the
/// wrong length, an unparsable id) is corrupt storage: the read fails with
/// `StoreError::Internal` (through `db_err`) naming the table, the column and
/// the row, logged here at error level. Never a default value.
pub(crate) fn corrupt(table: &str, column: &str, row: &str, problem: &str) -> rusqlite::Error {
    tracing::error!(table, column, row, problem, "corrupt row in storage");
    rusqlite::Error::UserFunctionError(
        format!("corrupt row: {table}.{column} of row {row:?} {problem}").into(),
    )
}

/// Text column `i` through `parse`, or [`corrupt`].
pub(crate) fn decode<T>(
    r: &Row<'_>,
    i: usize,
    (table, column, row): (&str, &str, &str),
    parse: impl FnOnce(&str) -> Option<T>,
) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    parse(&text).ok_or_else(|| corrupt(table, column, row, &format!("holds {text:?}")))
}

/// The row's own id (column `i`) through `parse`, or [`corrupt`].
pub(crate) fn decode_id<T>(
    r: &Row<'_>,
    i: usize,
    table: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    parse(&text).ok_or_else(|| corrupt(table, "id", &text, "is not a valid id"))
}

/// A SHA-256 digest as stored, or [`corrupt`] when it is not 32 bytes.
pub(crate) fn digest32(
    v: Vec<u8>,
    (table, column, row): (&str, &str, &str),
) -> rusqlite::Result<[u8; 32]> {
    gatehouse_store::decode::digest(&v).map_err(|problem| corrupt(table, column, row, &problem))
}

/// A scope set as stored (its bits), or [`corrupt`] when it holds a bit no
/// scope has.
pub(crate) fn scopes(
    bits: i64,
    (table, column, row): (&str, &str, &str),
) -> rusqlite::Result<ScopeSet> {
    gatehouse_store::decode::scopes(bits).map_err(|problem| corrupt(table, column, row, &problem))
}

pub(crate) const USER_COLS: &str =
    "id, email, name, role, status, password_hash IS NOT NULL, created_at, updated_at";

pub(crate) fn user_row(r: &Row<'_>) -> rusqlite::Result<User> {
    let id = decode_id(r, 0, "users", UserId::parse)?;
    let at = |column| ("users", column, id.as_str());
    Ok(User {
        email: Email::from_trusted(r.get(1)?),
        name: Name::from_trusted(r.get(2)?),
        role: decode(r, 3, at("role"), |t| Role::parse(t).ok())?,
        status: decode(r, 4, at("status"), |t| UserStatus::parse(t).ok())?,
        has_password: r.get(5)?,
        created_at: Timestamp::from_millis(r.get(6)?),
        updated_at: Timestamp::from_millis(r.get(7)?),
        id,
    })
}

pub(crate) const PRODUCT_COLS: &str = "id, name, sku, price, stock, status, created_at, updated_at";

pub(crate) fn product_row(r: &Row<'_>) -> rusqlite::Result<Product> {
    let id = decode_id(r, 0, "products", ProductId::parse)?;
    Ok(Product {
        name: Name::from_trusted(r.get(1)?),
        sku: Sku::from_trusted(r.get(2)?),
        price: r.get(3)?,
        stock: r.get(4)?,
        status: decode(r, 5, ("products", "status", id.as_str()), |t| {
            ProductStatus::parse(t).ok()
        })?,
        created_at: Timestamp::from_millis(r.get(6)?),
        updated_at: Timestamp::from_millis(r.get(7)?),
        id,
    })
}

pub(crate) const API_KEY_COLS: &str =
    "id, org_id, name, scopes, created_at, revoked_at, prefix, owner_id, expires_at, last_used_at";

pub(crate) fn api_key_row(r: &Row<'_>) -> rusqlite::Result<ApiKey> {
    let id = decode_id(r, 0, "api_keys", ApiKeyId::parse)?;
    Ok(ApiKey {
        org: OrgId::from_trusted(r.get(1)?),
        name: r.get(2)?,
        scopes: scopes(r.get(3)?, ("api_keys", "scopes", id.as_str()))?,
        created_at: Timestamp::from_millis(r.get(4)?),
        revoked_at: r.get::<_, Option<i64>>(5)?.map(Timestamp::from_millis),
        prefix: r.get(6)?,
        owner: r.get::<_, Option<String>>(7)?.map(UserId::from_trusted),
        expires_at: r.get::<_, Option<i64>>(8)?.map(Timestamp::from_millis),
        last_used_at: r.get::<_, Option<i64>>(9)?.map(Timestamp::from_millis),
        id,
    })
}

pub(crate) const CLIENT_COLS: &str = "id, org_id, name, secret_hash, previous_secret_hash, previous_secret_until, scopes, redirect_uris, admin_approved, owner_id, created_at, post_logout_redirect_uris, coalesce(updated_at, created_at), owner_inactive, rotation_required";

pub(crate) fn client_row(r: &Row<'_>) -> rusqlite::Result<Client> {
    let id = decode_id(r, 0, "clients", ClientId::parse)?;
    // A secret digest of the wrong length must not read as "no secret" (a
    // public client).
    let hash = |i: usize, column: &str| -> rusqlite::Result<Option<[u8; 32]>> {
        r.get::<_, Option<Vec<u8>>>(i)?
            .map(|v| digest32(v, ("clients", column, id.as_str())))
            .transpose()
    };
    let prev = hash(4, "previous_secret_hash")?;
    let prev_until: Option<i64> = r.get(5)?;
    let uris: String = r.get(7)?;
    let logout_uris: String = r.get(11)?;
    Ok(Client {
        org: OrgId::from_trusted(r.get(1)?),
        name: r.get(2)?,
        secret_hash: hash(3, "secret_hash")?,
        previous_secret: prev.zip(prev_until.map(Timestamp::from_millis)),
        scopes: scopes(r.get(6)?, ("clients", "scopes", id.as_str()))?,
        redirect_uris: uris
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        post_logout_redirect_uris: logout_uris
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
        admin_approved: r.get(8)?,
        owner: r.get::<_, Option<String>>(9)?.map(UserId::from_trusted),
        created_at: Timestamp::from_millis(r.get(10)?),
        updated_at: Timestamp::from_millis(r.get(12)?),
        suspension: gatehouse_domain::client::Suspension {
            owner_inactive: r.get(13)?,
            rotation_required: r.get(14)?,
        },
        id,
    })
}

pub(crate) fn org_row(r: &Row<'_>) -> rusqlite::Result<Organization> {
    let id = decode_id(r, 0, "organizations", OrgId::parse)?;
    Ok(Organization {
        name: r.get(1)?,
        plan: decode(r, 2, ("organizations", "plan", id.as_str()), |t| {
            Plan::parse(t).ok()
        })?,
        per_minute: r.get(3)?,
        per_second: r.get(4)?,
        created_at: Timestamp::from_millis(r.get(5)?),
        id,
    })
}
