//! Column lists and row decoding, shared by the `Store` methods.

use gatehouse_domain::{
    ApiKey, ApiKeyId, Client, ClientId, OrgId, Organization, Plan, Product, ProductId,
    ProductStatus, Role, ScopeSet, Timestamp, User, UserId, UserStatus,
    values::{Email, Name, Sku},
};
use gatehouse_store::{AuthCode, RefreshChain, RefreshToken};
use sqlx_core::row::Row;
use sqlx_postgres::PgRow;

pub(crate) type RowResult<T> = Result<T, sqlx_core::Error>;

fn ts(v: i64) -> Timestamp {
    Timestamp::from_millis(v)
}

fn opt_ts(v: Option<i64>) -> Option<Timestamp> {
    v.map(Timestamp::from_millis)
}

/// A 32-byte digest as stored (`bytea`).
pub(crate) fn digest32(v: &[u8]) -> [u8; 32] {
    <[u8; 32]>::try_from(v).unwrap_or([0; 32])
}

fn hash32(v: Option<Vec<u8>>) -> Option<[u8; 32]> {
    v.and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
}

fn scopes(bits: i16) -> ScopeSet {
    ScopeSet::from_bits(bits as u8)
}

pub(crate) const USER_COLS: &str =
    "id, email, name, role, status, password_hash IS NOT NULL, created_at, updated_at";

/// A user from the first eight columns ([`USER_COLS`]) of `r`.
pub(crate) fn user_row(r: &PgRow) -> RowResult<User> {
    Ok(User {
        id: UserId::from_trusted(r.try_get(0)?),
        email: Email::from_trusted(r.try_get(1)?),
        name: Name::from_trusted(r.try_get(2)?),
        role: Role::parse(r.try_get::<&str, _>(3)?).unwrap_or(Role::Viewer),
        status: UserStatus::parse(r.try_get::<&str, _>(4)?).unwrap_or(UserStatus::Inactive),
        has_password: r.try_get(5)?,
        created_at: ts(r.try_get(6)?),
        updated_at: ts(r.try_get(7)?),
    })
}

pub(crate) const PRODUCT_COLS: &str = "id, name, sku, price, stock, status, created_at, updated_at";

pub(crate) fn product_row(r: &PgRow) -> RowResult<Product> {
    Ok(Product {
        id: ProductId::from_trusted(r.try_get(0)?),
        name: Name::from_trusted(r.try_get(1)?),
        sku: Sku::from_trusted(r.try_get(2)?),
        price: r.try_get(3)?,
        stock: r.try_get(4)?,
        status: ProductStatus::parse(r.try_get::<&str, _>(5)?)
            .unwrap_or(ProductStatus::Discontinued),
        created_at: ts(r.try_get(6)?),
        updated_at: ts(r.try_get(7)?),
    })
}

pub(crate) const ORG_COLS: &str = "id, name, plan, per_minute, per_second, created_at";

pub(crate) fn org_row(r: &PgRow) -> RowResult<Organization> {
    let limit = |v: Option<i64>| v.and_then(|n| u32::try_from(n).ok());
    Ok(Organization {
        id: OrgId::from_trusted(r.try_get(0)?),
        name: r.try_get(1)?,
        plan: Plan::parse(r.try_get::<&str, _>(2)?).unwrap_or(Plan::Free),
        per_minute: limit(r.try_get(3)?),
        per_second: limit(r.try_get(4)?),
        created_at: ts(r.try_get(5)?),
    })
}

pub(crate) const CLIENT_COLS: &str = "id, org_id, name, secret_hash, previous_secret_hash, previous_secret_until, scopes, redirect_uris, admin_approved, owner_id, created_at";

pub(crate) fn client_row(r: &PgRow) -> RowResult<Client> {
    let prev = hash32(r.try_get(4)?);
    let prev_until: Option<i64> = r.try_get(5)?;
    Ok(Client {
        id: ClientId::from_trusted(r.try_get(0)?),
        org: OrgId::from_trusted(r.try_get(1)?),
        name: r.try_get(2)?,
        secret_hash: hash32(r.try_get(3)?),
        previous_secret: prev.zip(opt_ts(prev_until)),
        scopes: scopes(r.try_get(6)?),
        redirect_uris: r.try_get(7)?,
        admin_approved: r.try_get(8)?,
        owner: r.try_get::<Option<String>, _>(9)?.map(UserId::from_trusted),
        created_at: ts(r.try_get(10)?),
    })
}

pub(crate) const API_KEY_COLS: &str = "id, org_id, name, scopes, created_at, revoked_at";

pub(crate) fn api_key_row(r: &PgRow) -> RowResult<ApiKey> {
    Ok(ApiKey {
        id: ApiKeyId::from_trusted(r.try_get(0)?),
        org: OrgId::from_trusted(r.try_get(1)?),
        name: r.try_get(2)?,
        scopes: scopes(r.try_get(3)?),
        created_at: ts(r.try_get(4)?),
        revoked_at: opt_ts(r.try_get(5)?),
    })
}

pub(crate) const CODE_COLS: &str = "digest, org_id, client_id, user_id, redirect_uri, scopes, code_challenge, created_at, expires_at, used_at, chain_id";

pub(crate) fn code_row(r: &PgRow) -> RowResult<AuthCode> {
    Ok(AuthCode {
        digest: digest32(r.try_get(0)?),
        org: OrgId::from_trusted(r.try_get(1)?),
        client: ClientId::from_trusted(r.try_get(2)?),
        user: UserId::from_trusted(r.try_get(3)?),
        redirect_uri: r.try_get(4)?,
        scopes: scopes(r.try_get(5)?),
        code_challenge: r.try_get(6)?,
        created_at: ts(r.try_get(7)?),
        expires_at: ts(r.try_get(8)?),
        used_at: opt_ts(r.try_get(9)?),
        chain: r.try_get(10)?,
    })
}

pub(crate) const CHAIN_COLS: &str =
    "id, org_id, client_id, user_id, scopes, created_at, ends_at, revoked_at";

/// A chain from the columns of [`CHAIN_COLS`] starting at `at`.
pub(crate) fn chain_row(r: &PgRow, at: usize) -> RowResult<RefreshChain> {
    Ok(RefreshChain {
        id: r.try_get(at)?,
        org: OrgId::from_trusted(r.try_get(at + 1)?),
        client: ClientId::from_trusted(r.try_get(at + 2)?),
        user: UserId::from_trusted(r.try_get(at + 3)?),
        scopes: scopes(r.try_get(at + 4)?),
        created_at: ts(r.try_get(at + 5)?),
        ends_at: ts(r.try_get(at + 6)?),
        revoked_at: opt_ts(r.try_get(at + 7)?),
    })
}

pub(crate) const TOKEN_COLS: &str = "digest, chain_id, issued_at, expires_at, used_at, successor_sealed, successor_until, access_jti";

pub(crate) fn token_row(r: &PgRow) -> RowResult<RefreshToken> {
    Ok(RefreshToken {
        digest: digest32(r.try_get(0)?),
        chain: r.try_get(1)?,
        issued_at: ts(r.try_get(2)?),
        expires_at: ts(r.try_get(3)?),
        used_at: opt_ts(r.try_get(4)?),
        successor_sealed: r.try_get(5)?,
        successor_until: opt_ts(r.try_get(6)?),
        access_jti: r.try_get(7)?,
    })
}
