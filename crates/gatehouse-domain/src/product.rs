//! Products and the status rules of D18.

use serde::Serialize;

use crate::error::DomainError;
use crate::ids::ProductId;
use crate::time::Timestamp;
use crate::user::str_enum;
use crate::values::{Name, Sku};

str_enum!(ProductStatus, "available, out_of_stock, discontinued", {
    Available => "available",
    OutOfStock => "out_of_stock",
    Discontinued => "discontinued",
});

impl ProductStatus {
    /// The status that follows from the stock when not discontinued (D18).
    pub fn for_stock(stock: i64) -> Self {
        if stock > 0 {
            ProductStatus::Available
        } else {
            ProductStatus::OutOfStock
        }
    }
}

/// The Product schema of interface.md §2.2 (`updated_at` is kept for auditing
/// but not part of the schema).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Product {
    pub id: ProductId,
    pub name: Name,
    pub sku: Sku,
    pub price: i64,
    pub stock: i64,
    pub status: ProductStatus,
    pub created_at: Timestamp,
    #[serde(skip)]
    pub updated_at: Timestamp,
}

#[derive(Clone, Debug)]
pub struct NewProduct {
    pub name: Name,
    pub sku: Sku,
    pub price: i64,
    pub stock: i64,
    /// Only `discontinued` may be chosen at creation (D16); otherwise the
    /// status follows the stock (D18).
    pub discontinued: bool,
}

impl NewProduct {
    pub fn into_product(self, now: Timestamp) -> Product {
        Product {
            id: ProductId::generate(),
            status: if self.discontinued {
                ProductStatus::Discontinued
            } else {
                ProductStatus::for_stock(self.stock)
            },
            name: self.name,
            sku: self.sku,
            price: self.price,
            stock: self.stock,
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ProductPatch {
    pub name: Option<Name>,
    pub sku: Option<Sku>,
    pub price: Option<i64>,
    pub stock: Option<i64>,
    pub status: Option<ProductStatus>,
}

/// Applies a patch (D18). Returns the product as it would be and whether anything changed.
pub fn apply_patch(
    current: &Product,
    patch: &ProductPatch,
    now: Timestamp,
) -> Result<(Product, bool), DomainError> {
    let mut next = current.clone();
    if let Some(n) = &patch.name {
        next.name = n.clone();
    }
    if let Some(s) = &patch.sku {
        next.sku = s.clone();
    }
    if let Some(p) = patch.price {
        next.price = p;
    }
    if let Some(s) = patch.stock {
        next.stock = s;
    }
    next.status = match patch.status {
        Some(ProductStatus::Discontinued) => ProductStatus::Discontinued,
        Some(wanted) => {
            let follows = ProductStatus::for_stock(next.stock);
            if wanted != follows {
                return Err(DomainError::InvalidStateTransition(format!(
                    "status {} disagrees with a stock of {}; it would be {}",
                    wanted.as_str(),
                    next.stock,
                    follows.as_str()
                )));
            }
            follows
        }
        None if current.status == ProductStatus::Discontinued => ProductStatus::Discontinued,
        None => ProductStatus::for_stock(next.stock),
    };
    let changed = next != *current;
    if changed {
        next.updated_at = now.max(current.updated_at);
    }
    Ok((next, changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(stock: i64, status: ProductStatus) -> Product {
        Product {
            id: ProductId::generate(),
            name: Name::parse("Shirt").unwrap(),
            sku: Sku::parse("S-1").unwrap(),
            price: 100,
            stock,
            status,
            created_at: Timestamp::from_millis(1),
            updated_at: Timestamp::from_millis(1),
        }
    }

    #[test]
    fn stock_drives_status_unless_discontinued() {
        let p = product(5, ProductStatus::Available);
        let (n, _) = apply_patch(
            &p,
            &ProductPatch {
                stock: Some(0),
                ..Default::default()
            },
            Timestamp::from_millis(2),
        )
        .unwrap();
        assert_eq!(n.status, ProductStatus::OutOfStock);
        let d = product(5, ProductStatus::Discontinued);
        let (n, _) = apply_patch(
            &d,
            &ProductPatch {
                stock: Some(0),
                ..Default::default()
            },
            Timestamp::from_millis(2),
        )
        .unwrap();
        assert_eq!(n.status, ProductStatus::Discontinued);
    }

    #[test]
    fn status_must_agree_with_stock() {
        let d = product(0, ProductStatus::Discontinued);
        let back = ProductPatch {
            status: Some(ProductStatus::Available),
            ..Default::default()
        };
        assert!(matches!(
            apply_patch(&d, &back, Timestamp::from_millis(2)),
            Err(DomainError::InvalidStateTransition(_))
        ));
        let ok = ProductPatch {
            status: Some(ProductStatus::OutOfStock),
            ..Default::default()
        };
        assert_eq!(
            apply_patch(&d, &ok, Timestamp::from_millis(2))
                .unwrap()
                .0
                .status,
            ProductStatus::OutOfStock
        );
        let restock = ProductPatch {
            status: Some(ProductStatus::Available),
            stock: Some(3),
            ..Default::default()
        };
        assert_eq!(
            apply_patch(&d, &restock, Timestamp::from_millis(2))
                .unwrap()
                .0
                .status,
            ProductStatus::Available
        );
    }

    #[test]
    fn creation_status_follows_stock() {
        let mk = |stock, discontinued| {
            NewProduct {
                name: Name::parse("x").unwrap(),
                sku: Sku::parse("x").unwrap(),
                price: 1,
                stock,
                discontinued,
            }
            .into_product(Timestamp::from_millis(1))
            .status
        };
        assert_eq!(mk(0, false), ProductStatus::OutOfStock);
        assert_eq!(mk(2, false), ProductStatus::Available);
        assert_eq!(mk(2, true), ProductStatus::Discontinued);
    }
}
