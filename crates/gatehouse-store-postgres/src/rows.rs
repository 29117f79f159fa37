//! Column lists and row decoding, shared by the `Store` methods.

use gatehouse_domain::{
    ApiKey, ApiKeyId, ChainId, Client, ClientId, Jti, OrgId, Organization, Plan, Product,
    ProductId, ProductStatus, Role, ScopeSet, Timestamp, User, UserId, UserStatus,
    values::{Email, Name, Sku},
};
use gatehouse_store::{AuthCode, RefreshChain, RefreshToken, decode};
use sqlx_core::row::Row;
use sqlx_postgres::PgRow;

pub(crate) type RowResult<T> = Result<T, sqlx_core::Error>;

fn ts(v: i64) -> Timestamp {
    Timestamp::from_millis(v)
}

fn opt_ts(v: Option<i64>) -> Option<Timestamp> {
    v.map(Timestamp::from_millis)
}

/// A stored value no row can hold (an unknown enum text, a digest of the
/// wrong length, an unparsable id) is corrupt storage: the read fails with
/// `StoreError::Internal` (through `db_err`) naming the table, the column and
/// the row, logged here at error level. Never a default value.
pub(crate) fn corrupt(table: &str, column: &str, row: &str, problem: &str) -> sqlx_core::Error {
    tracing::error!(table, column, row, problem, "corrupt row in storage");
    sqlx_core::Error::Decode(
        format!("corrupt row: {table}.{column} of row {row:?} {problem}").into(),
    )
}

/// Text column `i` through `parse`, or [`corrupt`].
pub(crate) fn decode<T>(
    r: &PgRow,
    i: usize,
    (table, column, row): (&str, &str, &str),
    parse: impl FnOnce(&str) -> Option<T>,
) -> RowResult<T> {
    let text: &str = r.try_get(i)?;
    parse(text).ok_or_else(|| corrupt(table, column, row, &format!("holds {text:?}")))
}

/// The row's own id (column `i`) through `parse`, or [`corrupt`].
fn decode_id<T>(
    r: &PgRow,
    i: usize,
    table: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> RowResult<T> {
    let text: &str = r.try_get(i)?;
    parse(text).ok_or_else(|| corrupt(table, "id", text, "is not a valid id"))
}

/// A 32-byte digest as stored (`bytea`), or [`corrupt`].
pub(crate) fn digest32(v: &[u8], (table, column, row): (&str, &str, &str)) -> RowResult<[u8; 32]> {
    gatehouse_store::decode::digest(v).map_err(|problem| corrupt(table, column, row, &problem))
}

/// A scope set as stored (its bits), or [`corrupt`] when it holds a bit no
/// scope has.
pub(crate) fn scopes(bits: i32, (table, column, row): (&str, &str, &str)) -> RowResult<ScopeSet> {
    gatehouse_store::decode::scopes(bits.into())
        .map_err(|problem| corrupt(table, column, row, &problem))
}

pub(crate) const USER_COLS: &str =
    "id, email, name, role, status, password_hash IS NOT NULL, created_at, updated_at";

/// A user from the first eight columns ([`USER_COLS`]) of `r`.
pub(crate) fn user_row(r: &PgRow) -> RowResult<User> {
    let id = decode_id(r, 0, "users", UserId::parse)?;
    let at = |column| ("users", column, id.as_str());
    Ok(User {
        email: Email::from_trusted(r.try_get(1)?),
        name: Name::from_trusted(r.try_get(2)?),
        role: decode(r, 3, at("role"), |t| Role::parse(t).ok())?,
        status: decode(r, 4, at("status"), |t| UserStatus::parse(t).ok())?,
        has_password: r.try_get(5)?,
        created_at: ts(r.try_get(6)?),
        updated_at: ts(r.try_get(7)?),
        id,
    })
}

pub(crate) const PRODUCT_COLS: &str = "id, name, sku, price, stock, status, created_at, updated_at";

pub(crate) fn product_row(r: &PgRow) -> RowResult<Product> {
    let id = decode_id(r, 0, "products", ProductId::parse)?;
    Ok(Product {
        name: Name::from_trusted(r.try_get(1)?),
        sku: Sku::from_trusted(r.try_get(2)?),
        price: r.try_get(3)?,
        stock: r.try_get(4)?,
        status: decode(r, 5, ("products", "status", id.as_str()), |t| {
            ProductStatus::parse(t).ok()
        })?,
        created_at: ts(r.try_get(6)?),
        updated_at: ts(r.try_get(7)?),
        id,
    })
}

pub(crate) const ORG_COLS: &str = "id, name, plan, per_minute, per_second, created_at";

pub(crate) fn org_row(r: &PgRow) -> RowResult<Organization> {
    let limit = |v: Option<i64>| v.and_then(|n| u32::try_from(n).ok());
    let id = decode_id(r, 0, "organizations", OrgId::parse)?;
    Ok(Organization {
        name: r.try_get(1)?,
        plan: decode(r, 2, ("organizations", "plan", id.as_str()), |t| {
            Plan::parse(t).ok()
        })?,
        per_minute: limit(r.try_get(3)?),
        per_second: limit(r.try_get(4)?),
        created_at: ts(r.try_get(5)?),
        id,
    })
}

pub(crate) const CLIENT_COLS: &str = "id, org_id, name, secret_hash, previous_secret_hash, previous_secret_until, scopes, redirect_uris, admin_approved, owner_id, created_at, post_logout_redirect_uris, coalesce(updated_at, created_at), owner_inactive, rotation_required";

pub(crate) fn client_row(r: &PgRow) -> RowResult<Client> {
    let id = decode_id(r, 0, "clients", ClientId::parse)?;
    // A secret digest of the wrong length must not read as "no secret" (a
    // public client).
    let hash = |i: usize, column: &str| -> RowResult<Option<[u8; 32]>> {
        r.try_get::<Option<&[u8]>, _>(i)?
            .map(|v| digest32(v, ("clients", column, id.as_str())))
            .transpose()
    };
    let prev = hash(4, "previous_secret_hash")?;
    let prev_until: Option<i64> = r.try_get(5)?;
    Ok(Client {
        org: OrgId::from_trusted(r.try_get(1)?),
        name: r.try_get(2)?,
        secret_hash: hash(3, "secret_hash")?,
        previous_secret: prev.zip(opt_ts(prev_until)),
        scopes: scopes(r.try_get(6)?, ("clients", "scopes", id.as_str()))?,
        redirect_uris: r.try_get(7)?,
        post_logout_redirect_uris: r.try_get(11)?,
        admin_approved: r.try_get(8)?,
        owner: r.try_get::<Option<String>, _>(9)?.map(UserId::from_trusted),
        created_at: ts(r.try_get(10)?),
        updated_at: ts(r.try_get(12)?),
        suspension: gatehouse_domain::client::Suspension {
            owner_inactive: r.try_get(13)?,
            rotation_required: r.try_get(14)?,
        },
        id,
    })
}

pub(crate) const API_KEY_COLS: &str =
    "id, org_id, name, scopes, created_at, revoked_at, prefix, owner_id, expires_at, last_used_at";

pub(crate) fn api_key_row(r: &PgRow) -> RowResult<ApiKey> {
    let id = decode_id(r, 0, "api_keys", ApiKeyId::parse)?;
    Ok(ApiKey {
        org: OrgId::from_trusted(r.try_get(1)?),
        name: r.try_get(2)?,
        scopes: scopes(r.try_get(3)?, ("api_keys", "scopes", id.as_str()))?,
        created_at: ts(r.try_get(4)?),
        revoked_at: opt_ts(r.try_get(5)?),
        prefix: r.try_get(6)?,
        owner: r.try_get::<Option<String>, _>(7)?.map(UserId::from_trusted),
        expires_at: opt_ts(r.try_get(8)?),
        last_used_at: opt_ts(r.try_get(9)?),
        id,
    })
}

pub(crate) const CODE_COLS: &str = "digest, org_id, client_id, user_id, redirect_uri, scopes, code_challenge, created_at, expires_at, used_at, chain_id, nonce, auth_time, sid, amr, acr";

pub(crate) fn code_row(r: &PgRow) -> RowResult<AuthCode> {
    let chain: Option<String> = r.try_get(10)?;
    // The digest is the row's key: the row is named by its chain.
    let row = chain.clone().unwrap_or_else(|| "(no chain)".into());
    let row = row.as_str();
    Ok(AuthCode {
        digest: digest32(r.try_get(0)?, ("auth_codes", "digest", row))?,
        org: OrgId::from_trusted(r.try_get(1)?),
        client: ClientId::from_trusted(r.try_get(2)?),
        user: UserId::from_trusted(r.try_get(3)?),
        redirect_uri: r.try_get(4)?,
        scopes: scopes(r.try_get(5)?, ("auth_codes", "scopes", row))?,
        code_challenge: r.try_get(6)?,
        created_at: ts(r.try_get(7)?),
        expires_at: ts(r.try_get(8)?),
        used_at: opt_ts(r.try_get(9)?),
        chain: decode::optional(chain.as_deref(), ChainId::parse)
            .map_err(|p| corrupt("auth_codes", "chain_id", row, &p))?,
        nonce: r.try_get(11)?,
        auth_time: opt_ts(r.try_get(12)?),
        sid: r.try_get(13)?,
        authn: gatehouse_domain::mfa::Authn::from_columns(r.try_get(14)?, r.try_get(15)?),
    })
}

pub(crate) const CHAIN_COLS: &str = "id, org_id, client_id, user_id, scopes, created_at, ends_at, revoked_at, auth_time, sid, amr, acr";

/// A chain from the columns of [`CHAIN_COLS`] starting at `at`.
pub(crate) fn chain_row(r: &PgRow, at: usize) -> RowResult<RefreshChain> {
    let text: String = r.try_get(at)?;
    let id = decode::text(&text, ChainId::parse)
        .map_err(|p| corrupt("refresh_chains", "id", &text, &p))?;
    Ok(RefreshChain {
        org: OrgId::from_trusted(r.try_get(at + 1)?),
        client: ClientId::from_trusted(r.try_get(at + 2)?),
        user: UserId::from_trusted(r.try_get(at + 3)?),
        scopes: scopes(r.try_get(at + 4)?, ("refresh_chains", "scopes", &text))?,
        created_at: ts(r.try_get(at + 5)?),
        ends_at: ts(r.try_get(at + 6)?),
        revoked_at: opt_ts(r.try_get(at + 7)?),
        auth_time: opt_ts(r.try_get(at + 8)?),
        sid: r.try_get(at + 9)?,
        authn: gatehouse_domain::mfa::Authn::from_columns(r.try_get(at + 10)?, r.try_get(at + 11)?),
        id,
    })
}

pub(crate) const TOKEN_COLS: &str = "digest, chain_id, issued_at, expires_at, used_at, successor_sealed, successor_until, access_jti";

pub(crate) fn token_row(r: &PgRow) -> RowResult<RefreshToken> {
    let chain: String = r.try_get(1)?;
    Ok(RefreshToken {
        // The digest is the row's key: the row is named by its chain.
        digest: digest32(r.try_get(0)?, ("refresh_tokens", "digest", &chain))?,
        chain: decode::text(&chain, ChainId::parse)
            .map_err(|p| corrupt("refresh_tokens", "chain_id", &chain, &p))?,
        issued_at: ts(r.try_get(2)?),
        expires_at: ts(r.try_get(3)?),
        used_at: opt_ts(r.try_get(4)?),
        successor_sealed: r.try_get(5)?,
        successor_until: opt_ts(r.try_get(6)?),
        access_jti: decode::optional(r.try_get::<Option<String>, _>(7)?.as_deref(), Jti::parse)
            .map_err(|p| corrupt("refresh_tokens", "access_jti", &chain, &p))?,
    })
}
