//! Lists, equality filters and paging of users (D14) and products, with
//! the same semantics as the SQLite backend. Storage does not search: `q` is
//! answered by the application's in-memory index (`gatehouse_app::search`).

use gatehouse_domain::{Listing, OrgId, Page, Product, ProductStatus, Role, User, UserStatus};
use gatehouse_store::{ProductFilter, UserFilter};
use sqlx_core::query_builder::QueryBuilder;
use sqlx_core::query_scalar::query_scalar;
use sqlx_postgres::{PgConnection, PgRow, Postgres};

use crate::TxResult;
use crate::rows::{PRODUCT_COLS, RowResult, USER_COLS, product_row, user_row};

/// Which table a list reads and how its rows decode.
pub(crate) struct Table<T> {
    pub name: &'static str,
    pub cols: &'static str,
    pub counts: &'static str,
    pub map: fn(&PgRow) -> RowResult<T>,
}

pub(crate) const USERS: Table<User> = Table {
    name: "users",
    cols: USER_COLS,
    counts: "user_counts",
    map: user_row,
};

pub(crate) const PRODUCTS: Table<Product> = Table {
    name: "products",
    cols: PRODUCT_COLS,
    counts: "product_counts",
    map: product_row,
};

/// The equality filters of a list (the columns of its counters too).
#[derive(Clone, Copy, Default)]
pub(crate) struct Filters {
    role: Option<Role>,
    user_status: Option<UserStatus>,
    product_status: Option<ProductStatus>,
}

impl Filters {
    fn push(&self, qb: &mut QueryBuilder<'_, Postgres>, org: &OrgId) {
        qb.push(" WHERE org_id = ")
            .push_bind(org.as_str().to_owned());
        if let Some(role) = self.role {
            qb.push(" AND role = ").push_bind(role.as_str());
        }
        if let Some(status) = self.user_status {
            qb.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(status) = self.product_status {
            qb.push(" AND status = ").push_bind(status.as_str());
        }
    }
}

impl Filters {
    pub(crate) fn users(f: &UserFilter) -> Self {
        Self {
            role: f.role,
            user_status: f.status,
            product_status: None,
        }
    }

    pub(crate) fn products(f: &ProductFilter) -> Self {
        Self {
            product_status: f.status,
            ..Self::default()
        }
    }
}

fn offset(page: Page) -> i64 {
    page.offset.min(i64::MAX as u64) as i64
}

/// One page of a list with its exact total (D14), the total from the
/// counters the triggers keep: O(1), not a count of a million rows.
pub(crate) async fn page<T>(
    c: &mut PgConnection,
    table: &Table<T>,
    org: &OrgId,
    q: &Filters,
    page: Page,
) -> TxResult<Listing<T>> {
    let mut qb = QueryBuilder::new(format!(
        "SELECT coalesce(sum(n), 0)::bigint FROM {}",
        table.counts
    ));
    q.push(&mut qb, org);
    let total: i64 = qb.build_query_scalar().fetch_one(&mut *c).await?;
    let total = total.max(0) as u64;
    let items = if page.offset >= total {
        Vec::new()
    } else {
        let mut qb = QueryBuilder::new(format!("SELECT {} FROM {}", table.cols, table.name));
        q.push(&mut qb, org);
        push_order_and_page(&mut qb, page);
        let rows = qb.build().fetch_all(&mut *c).await?;
        rows.iter().map(table.map).collect::<RowResult<Vec<T>>>()?
    };
    Ok(Listing { items, total })
}

fn push_order_and_page(qb: &mut QueryBuilder<'_, Postgres>, page: Page) {
    qb.push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(i64::from(page.limit))
        .push(" OFFSET ")
        .push_bind(offset(page));
}

/// D32: up to `limit` rows strictly after the row `after` in the list order;
/// `None` when `after` is not a row of the organization.
pub(crate) async fn after<T>(
    c: &mut PgConnection,
    table: &Table<T>,
    org: &OrgId,
    q: &Filters,
    after: Option<&str>,
    limit: u32,
) -> TxResult<Option<Vec<T>>> {
    let mut qb = QueryBuilder::new(format!("SELECT {} FROM {}", table.cols, table.name));
    q.push(&mut qb, org);
    if let Some(id) = after {
        let at: Option<i64> = query_scalar(&format!(
            "SELECT created_at FROM {} WHERE id = $1 AND org_id = $2",
            table.name
        ))
        .bind(id)
        .bind(org.as_str())
        .fetch_optional(&mut *c)
        .await?;
        let Some(at) = at else { return Ok(None) };
        // A row comparison in the index's order: a range scan from the cursor.
        qb.push(" AND (created_at, id) < (")
            .push_bind(at)
            .push(", ")
            .push_bind(id.to_owned())
            .push(")");
    }
    qb.push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(i64::from(limit));
    let rows = qb.build().fetch_all(&mut *c).await?;
    Ok(Some(
        rows.iter().map(table.map).collect::<RowResult<Vec<T>>>()?,
    ))
}
