//! OAuth scopes (interface.md §5, D16, D22, D29) and sets of them.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::user::Role;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Scope {
    UsersRead = 0,
    UsersWrite = 1,
    ProfileRead = 2,
    ProfileWrite = 3,
    Admin = 4,
    ProductsRead = 5,
    ProductsWrite = 6,
    /// OpenID Connect (D49): an `id_token` and `/oauth/userinfo`.
    OpenId = 7,
    /// OpenID Connect `profile` claims (`name`, `updated_at`).
    Profile = 8,
    /// OpenID Connect `email` claims (`email`, `email_verified`).
    Email = 9,
    /// D46: list and view the organization's applications, API keys and usage.
    ApplicationsRead = 10,
    /// D46: register, change, rotate and delete applications; create and
    /// revoke API keys.
    ApplicationsWrite = 11,
    /// D54: read the organization's events (admins only, D29 continued).
    EventsRead = 12,
    /// D55: list and view the organization's webhook endpoints and their
    /// delivery log (admins only, D29 continued).
    WebhooksRead = 13,
    /// D55: create, change, rotate, test, replay and delete webhook
    /// endpoints; redeliver events (admins only, D29 continued).
    WebhooksWrite = 14,
    /// D58: read and export the organization's audit log and its
    /// checkpoints (admins only, D29 continued).
    AuditRead = 15,
}

impl Scope {
    /// Every scope, in the canonical order used when a set is written out.
    pub const ALL: [Scope; 16] = [
        Scope::UsersRead,
        Scope::UsersWrite,
        Scope::ProfileRead,
        Scope::ProfileWrite,
        Scope::ProductsRead,
        Scope::ProductsWrite,
        Scope::ApplicationsRead,
        Scope::ApplicationsWrite,
        Scope::EventsRead,
        Scope::WebhooksRead,
        Scope::WebhooksWrite,
        Scope::AuditRead,
        Scope::Admin,
        Scope::OpenId,
        Scope::Profile,
        Scope::Email,
    ];

    /// D49: the OpenID Connect scopes. Granted only at `/oauth/authorize`
    /// and only when asked for by name; never to client credentials.
    pub fn is_identity(self) -> bool {
        matches!(self, Scope::OpenId | Scope::Profile | Scope::Email)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::UsersRead => "users:read",
            Scope::UsersWrite => "users:write",
            Scope::ProfileRead => "profile:read",
            Scope::ProfileWrite => "profile:write",
            Scope::Admin => "admin",
            Scope::ProductsRead => "products:read",
            Scope::ProductsWrite => "products:write",
            Scope::OpenId => "openid",
            Scope::Profile => "profile",
            Scope::Email => "email",
            Scope::ApplicationsRead => "applications:read",
            Scope::ApplicationsWrite => "applications:write",
            Scope::EventsRead => "events:read",
            Scope::WebhooksRead => "webhooks:read",
            Scope::WebhooksWrite => "webhooks:write",
            Scope::AuditRead => "audit:read",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|sc| sc.as_str() == s)
    }

    /// What the scope grants, in plain words (for consent pages and docs).
    pub fn description(self) -> &'static str {
        match self {
            Scope::UsersRead => "List and view the users of your organization",
            Scope::UsersWrite => "Create, change and remove users of your organization",
            Scope::ProfileRead => "Read your own profile",
            Scope::ProfileWrite => "Change your own profile",
            Scope::Admin => "Full administrative access",
            Scope::ProductsRead => "List and view the product catalog",
            Scope::ProductsWrite => "Add, change and remove products in the catalog",
            Scope::OpenId => "Sign you in with your account",
            Scope::Profile => "See your name",
            Scope::Email => "See your e-mail address",
            Scope::ApplicationsRead => {
                "View your organization's applications, API keys and their usage"
            }
            Scope::ApplicationsWrite => {
                "Register and change applications, rotate their secrets, create and revoke API keys"
            }
            Scope::EventsRead => "Read the record of changes in your organization",
            Scope::WebhooksRead => "View your organization's webhook endpoints and deliveries",
            Scope::WebhooksWrite => {
                "Register, change, test and remove webhook endpoints; redeliver events"
            }
            Scope::AuditRead => "Read and export your organization's audit log",
        }
    }
}

/// A set of scopes, kept as a bit set.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ScopeSet(u16);

impl ScopeSet {
    pub const EMPTY: ScopeSet = ScopeSet(0);

    pub fn all() -> Self {
        Scope::ALL.into_iter().collect()
    }

    pub fn contains(self, s: Scope) -> bool {
        self.0 & (1 << s as u16) != 0
    }

    pub fn insert(&mut self, s: Scope) {
        self.0 |= 1 << s as u16;
    }

    pub fn without(self, s: Scope) -> Self {
        Self(self.0 & !(1 << s as u16))
    }

    pub fn with(mut self, s: Scope) -> Self {
        self.insert(s);
        self
    }

    pub fn intersect(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    pub fn is_subset(self, other: Self) -> bool {
        self.0 & !other.0 == 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether a token with these scopes may use an endpoint needing `required`:
    /// `admin` satisfies every scope check (D22).
    pub fn satisfies(self, required: Scope) -> bool {
        self.contains(required) || self.contains(Scope::Admin)
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// Parses a space-separated scope string; the error names the first unknown scope.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut set = ScopeSet::EMPTY;
        for word in s.split(' ').filter(|w| !w.is_empty()) {
            match Scope::parse(word) {
                Some(sc) => set.insert(sc),
                None => return Err(word.to_owned()),
            }
        }
        Ok(set)
    }

    pub fn bits(self) -> u16 {
        self.0
    }

    pub fn from_bits(bits: u16) -> Self {
        Self(bits & ScopeSet::all().0)
    }

    /// D49: the OpenID Connect scopes `openid`, `profile` and `email`.
    pub fn identity() -> Self {
        Scope::ALL.into_iter().filter(|s| s.is_identity()).collect()
    }

    /// This set less the OpenID Connect scopes (D49).
    pub fn without_identity(self) -> Self {
        Self(self.0 & !Self::identity().0)
    }

    /// The scopes a user of this role may ever be granted (D29, extended by
    /// D46: `viewer` gets neither `applications:*` scope, `editor` and
    /// `admin` get both). `admin` is further limited to clients an operator
    /// approved.
    pub fn for_role(role: Role) -> Self {
        let viewer: ScopeSet = [
            Scope::UsersRead,
            Scope::ProductsRead,
            Scope::ProfileRead,
            Scope::ProfileWrite,
            // D49: every role may have the OpenID Connect scopes.
            Scope::OpenId,
            Scope::Profile,
            Scope::Email,
        ]
        .into_iter()
        .collect();
        match role {
            Role::Viewer => viewer,
            Role::Editor => viewer
                .with(Scope::ProductsWrite)
                .with(Scope::ApplicationsRead)
                .with(Scope::ApplicationsWrite),
            Role::Admin => viewer
                .with(Scope::ProductsWrite)
                .with(Scope::ApplicationsRead)
                .with(Scope::ApplicationsWrite)
                .with(Scope::UsersWrite)
                // D29 (continued): the third round's scopes are admins' only.
                .with(Scope::EventsRead)
                .with(Scope::WebhooksRead)
                .with(Scope::WebhooksWrite)
                .with(Scope::AuditRead)
                .with(Scope::Admin),
        }
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        let mut s = ScopeSet::EMPTY;
        for sc in iter {
            s.insert(sc);
        }
        s
    }
}

impl fmt::Display for ScopeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for s in self.iter() {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            f.write_str(s.as_str())?;
        }
        Ok(())
    }
}

impl fmt::Debug for ScopeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScopeSet({self})")
    }
}

impl Serialize for ScopeSet {
    /// As a list of scope strings.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().map(Scope::as_str))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_writes_space_separated_scopes() {
        let s = ScopeSet::parse("products:read  users:read").unwrap();
        assert!(s.contains(Scope::UsersRead) && s.contains(Scope::ProductsRead));
        assert!(!s.contains(Scope::UsersWrite));
        assert_eq!(s.to_string(), "users:read products:read");
        assert_eq!(ScopeSet::parse("users:read bogus"), Err("bogus".to_owned()));
    }

    #[test]
    fn admin_satisfies_every_scope() {
        let s = ScopeSet::EMPTY.with(Scope::Admin);
        assert!(s.satisfies(Scope::UsersWrite));
        assert!(
            !ScopeSet::EMPTY
                .with(Scope::UsersRead)
                .satisfies(Scope::UsersWrite)
        );
    }

    #[test]
    fn roles_allow_the_d29_scopes() {
        let v = ScopeSet::for_role(Role::Viewer);
        assert_eq!(
            v.to_string(),
            "users:read profile:read profile:write products:read openid profile email",
            "D49: every role may have the OpenID Connect scopes"
        );
        assert!(ScopeSet::for_role(Role::Editor).contains(Scope::ProductsWrite));
        assert!(!ScopeSet::for_role(Role::Editor).contains(Scope::UsersWrite));
        assert!(ScopeSet::for_role(Role::Admin).contains(Scope::UsersWrite));
        // D29 (continued): `events:read` is admins' only.
        assert!(ScopeSet::for_role(Role::Admin).contains(Scope::EventsRead));
        assert!(!ScopeSet::for_role(Role::Editor).contains(Scope::EventsRead));
        assert!(!ScopeSet::for_role(Role::Viewer).contains(Scope::EventsRead));
        for s in [Scope::WebhooksRead, Scope::WebhooksWrite] {
            assert!(ScopeSet::for_role(Role::Admin).contains(s));
            assert!(!ScopeSet::for_role(Role::Editor).contains(s));
            assert!(!ScopeSet::for_role(Role::Viewer).contains(s));
        }
    }
}
