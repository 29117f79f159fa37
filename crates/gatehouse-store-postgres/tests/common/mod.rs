//! Records the PostgreSQL backend's own tests build.

use gatehouse_domain::{
    ClientId, Email, Name, NewUser, OrgId, Organization, Plan, Role, ScopeSet, Timestamp, UserId,
    UserStatus,
};
use gatehouse_store::NewClient;

pub(crate) fn org() -> Organization {
    Organization {
        id: OrgId::generate(),
        name: "Race".into(),
        plan: Plan::Pro,
        per_minute: None,
        per_second: None,
        created_at: Timestamp::now(),
    }
}

pub(crate) fn user(email: &str, role: Role) -> NewUser {
    NewUser {
        id: UserId::generate(),
        email: Email::parse(email).unwrap(),
        name: Name::parse("Racer").unwrap(),
        role,
        status: UserStatus::Active,
        password_hash: Some("$argon2id$test".into()),
        created_at: Timestamp::now(),
    }
}

pub(crate) fn client() -> NewClient {
    NewClient {
        id: ClientId::generate(),
        name: "app".into(),
        secret_hash: Some([7; 32]),
        scopes: ScopeSet::parse("users:read").unwrap(),
        redirect_uris: vec!["https://app.example.com/cb".into()],
        admin_approved: false,
        owner: None,
        created_at: Timestamp::now(),
        post_logout_redirect_uris: vec![],
    }
}
