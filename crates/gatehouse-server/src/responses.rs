//! The resources as the API shows them (interface.md §2), kept apart from
//! the domain types so that a field added to a domain type is not published
//! by accident. They borrow from the domain value they are made from.

use gatehouse_domain::{Product, ProductStatus, Role, Timestamp, User, UserStatus};
use serde::Serialize;

/// The User schema (interface.md §2.1).
#[derive(Serialize)]
pub struct UserResponse<'a> {
    pub id: &'a str,
    pub email: &'a str,
    pub name: &'a str,
    pub role: Role,
    pub status: UserStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl<'a> From<&'a User> for UserResponse<'a> {
    fn from(u: &'a User) -> Self {
        Self {
            id: u.id.as_str(),
            email: u.email.as_str(),
            name: u.name.as_str(),
            role: u.role,
            status: u.status,
            created_at: u.created_at,
            updated_at: u.updated_at,
        }
    }
}

/// The Product schema (interface.md §2.2); `updated_at` is kept for
/// auditing, not shown.
#[derive(Serialize)]
pub struct ProductResponse<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub sku: &'a str,
    pub price: i64,
    pub stock: i64,
    pub status: ProductStatus,
    pub created_at: Timestamp,
}

impl<'a> From<&'a Product> for ProductResponse<'a> {
    fn from(p: &'a Product) -> Self {
        Self {
            id: p.id.as_str(),
            name: p.name.as_str(),
            sku: p.sku.as_str(),
            price: p.price,
            stock: p.stock,
            status: p.status,
            created_at: p.created_at,
        }
    }
}
