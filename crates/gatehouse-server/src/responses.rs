//! The resources as the API shows them (interface.md §2), kept apart from
//! the domain types so that a field added to a domain type is not published
//! by accident. They borrow from the domain value they are made from.

use gatehouse_domain::{Product, ProductStatus, Role, Timestamp, User, UserStatus};
use serde::Serialize;
use utoipa::ToSchema;

use crate::openapi::schemas;

// interface.md §2.1.
/// A user of the organization.
#[derive(Serialize, ToSchema)]
#[schema(as = User)]
pub struct UserResponse<'a> {
    #[schema(value_type = String, pattern = "^usr_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub email: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(schema_with = schemas::role)]
    pub role: Role,
    #[schema(schema_with = schemas::user_status)]
    pub status: UserStatus,
    #[schema(schema_with = schemas::timestamp)]
    pub created_at: Timestamp,
    #[schema(schema_with = schemas::timestamp)]
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

// interface.md §2.2; `updated_at` is kept for auditing, not shown.
/// A product of the catalog.
#[derive(Serialize, ToSchema)]
#[schema(as = Product)]
pub struct ProductResponse<'a> {
    #[schema(value_type = String, pattern = "^prod_[A-Za-z0-9]+$")]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(value_type = String)]
    pub sku: &'a str,
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub price: i64,
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub stock: i64,
    #[schema(schema_with = schemas::product_status)]
    pub status: ProductStatus,
    #[schema(schema_with = schemas::timestamp)]
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
