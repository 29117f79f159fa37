//! The fixed data set of the staging and mock environments (D33, D34): a
//! handful of users in every role and status and a small product catalog
//! covering every product status, so client developers can exercise filters,
//! search and paging against known data.

use crate::{Email, Name, NewProduct, Role, Sku, UserStatus};

/// One fixture user (fresh ids are generated each time the set is loaded).
#[derive(Clone, Debug)]
pub struct FixtureUser {
    pub email: Email,
    pub name: Name,
    pub role: Role,
    pub status: UserStatus,
}

/// The fixture set loaded into each organization.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// Newest first: the first user is the most recently created.
    pub users: Vec<FixtureUser>,
    /// Newest first.
    pub products: Vec<NewProduct>,
    /// D53, the mock only: the password hash (Argon2id PHC string) every
    /// fixture user gets; `None` elsewhere (staging users have no password).
    pub password_hash: Option<String>,
}

const USERS: &[(&str, &str, Role, UserStatus)] = &[
    (
        "ada@example.com",
        "Ada Lovelace",
        Role::Admin,
        UserStatus::Active,
    ),
    (
        "grace@example.com",
        "Grace Hopper",
        Role::Admin,
        UserStatus::Active,
    ),
    (
        "alan@example.com",
        "Alan Turing",
        Role::Editor,
        UserStatus::Active,
    ),
    (
        "katherine@example.com",
        "Katherine Johnson",
        Role::Editor,
        UserStatus::Active,
    ),
    (
        "edsger@example.com",
        "Edsger Dijkstra",
        Role::Viewer,
        UserStatus::Active,
    ),
    (
        "barbara@example.com",
        "Barbara Liskov",
        Role::Viewer,
        UserStatus::Active,
    ),
    (
        "dennis@example.com",
        "Dennis Ritchie",
        Role::Viewer,
        UserStatus::Inactive,
    ),
    (
        "margaret@example.com",
        "Margaret Hamilton",
        Role::Editor,
        UserStatus::PendingInvite,
    ),
    (
        "linus@example.com",
        "Linus Torvalds",
        Role::Viewer,
        UserStatus::PendingInvite,
    ),
];

/// (name, sku, price in cents, stock, discontinued)
const PRODUCTS: &[(&str, &str, i64, i64, bool)] = &[
    ("Blue Shirt", "SHIRT-BLUE-M", 2999, 120, false),
    ("Red Shirt", "SHIRT-RED-M", 2999, 0, false),
    ("Green Jacket", "JACKET-GREEN-L", 8999, 15, false),
    ("Rain Jacket", "JACKET-RAIN-M", 12999, 4, false),
    ("Wool Socks", "SOCKS-WOOL", 1299, 300, false),
    ("Canvas Sneakers", "SHOE-CANVAS-42", 5999, 0, false),
    ("Leather Boots", "SHOE-BOOT-43", 15999, 7, false),
    ("Straw Hat", "HAT-STRAW", 2499, 0, true),
    ("Denim Jeans", "JEANS-DENIM-32", 6999, 42, false),
    ("Linen Scarf", "SCARF-LINEN", 1999, 9, true),
];

impl Fixture {
    /// The standard fixture set (D33, D34).
    pub fn standard() -> Self {
        let users = USERS
            .iter()
            .map(|&(email, name, role, status)| FixtureUser {
                email: Email::parse(email).expect("fixture e-mail is valid"),
                name: Name::parse(name).expect("fixture name is valid"),
                role,
                status,
            })
            .collect();
        let products = PRODUCTS
            .iter()
            .map(|&(name, sku, price, stock, discontinued)| NewProduct {
                name: Name::parse(name).expect("fixture name is valid"),
                sku: Sku::parse(sku).expect("fixture sku is valid"),
                price,
                stock,
                discontinued,
            })
            .collect();
        Self {
            users,
            products,
            password_hash: None,
        }
    }

    /// D53: the set with every user's password hash set to `hash`.
    pub fn with_password_hash(mut self, hash: String) -> Self {
        self.password_hash = Some(hash);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_set_covers_every_role_status_and_product_status() {
        let f = Fixture::standard();
        for role in [Role::Admin, Role::Editor, Role::Viewer] {
            assert!(f.users.iter().any(|u| u.role == role), "{role:?}");
        }
        for status in [
            UserStatus::Active,
            UserStatus::Inactive,
            UserStatus::PendingInvite,
        ] {
            assert!(f.users.iter().any(|u| u.status == status), "{status:?}");
        }
        assert!(f.products.iter().any(|p| p.discontinued));
        assert!(f.products.iter().any(|p| !p.discontinued && p.stock == 0));
        assert!(f.products.iter().any(|p| !p.discontinued && p.stock > 0));
        // D12: at least one active admin, so the last-admin rule holds.
        assert!(
            f.users
                .iter()
                .any(|u| u.role == Role::Admin && u.status == UserStatus::Active)
        );
    }
}
