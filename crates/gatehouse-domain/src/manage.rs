//! Who may manage which developer credentials (D46): the rules of the
//! management API, the same for every door (the API, the dashboard through
//! the API, and the operator's CLI, which holds every right).
//!
//! Pure functions over the caller's scopes and reach; the application layer
//! builds a [`Manager`] from the credential (and, for a person, their current
//! role) and asks it before every change.

use crate::error::DomainError;
use crate::ids::UserId;
use crate::scope::{Scope, ScopeSet};
use crate::time::Timestamp;
use crate::user::{Role, User, UserStatus};
use crate::{Client, FieldIssue};

/// Which of the organization's applications and keys a caller acts on (D46).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Every one of them: an `admin` user, a client-credentials token or an
    /// API key, or the operator.
    OrgWide,
    /// Only those this person owns (an `editor`, or a `viewer`, who never
    /// holds the scopes anyway).
    Owner(UserId),
}

/// A caller of the management use cases: the scopes its credential holds,
/// its reach, and who owns what it creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manager {
    pub scopes: ScopeSet,
    pub reach: Reach,
    /// D46 (revised): the owner of what this caller creates: the person
    /// signed in, whatever their role, or the owner of the credential (an
    /// API key's owner, a client-credentials token's application's owner);
    /// `None` (the organization's) only when that owner is none.
    pub owner: Option<UserId>,
}

/// `applications:read` and `applications:write`.
fn management_scopes() -> ScopeSet {
    ScopeSet::EMPTY
        .with(Scope::ApplicationsRead)
        .with(Scope::ApplicationsWrite)
}

impl Manager {
    /// The operator on the machine (D47): every scope, every record.
    pub fn operator() -> Self {
        Self {
            scopes: ScopeSet::all(),
            reach: Reach::OrgWide,
            owner: None,
        }
    }

    /// A caller acting for a person of `role` (D46): an `admin` acts on the
    /// whole organization, anyone else only on what they own; whatever the
    /// role, the person owns what they create (D46 revised).
    pub fn person(scopes: ScopeSet, user: UserId, role: Role) -> Self {
        let reach = match role {
            Role::Admin => Reach::OrgWide,
            Role::Editor | Role::Viewer => Reach::Owner(user.clone()),
        };
        Self {
            scopes,
            reach,
            owner: Some(user),
        }
    }

    /// A client-credentials token or an API key (D46): organization-wide.
    /// What it creates belongs to `owner`, the credential's owner (D46
    /// revised: the key's owner, or the token's application's owner).
    pub fn credential(scopes: ScopeSet, owner: Option<UserId>) -> Self {
        Self {
            scopes,
            reach: Reach::OrgWide,
            owner,
        }
    }

    /// The owner a new application or key of this caller gets (D46
    /// revised: whatever a person creates is theirs; what a credential
    /// creates is its owner's).
    pub fn owner(&self) -> Option<&UserId> {
        self.owner.as_ref()
    }

    /// D46 (revised): only an admin or an organization-wide credential
    /// moves an application to another owner.
    pub fn may_move(&self) -> Result<(), DomainError> {
        match self.reach {
            Reach::OrgWide => Ok(()),
            Reach::Owner(_) => Err(DomainError::MissingScope(
                "only an admin or an organization-wide credential may move an application to another owner".into(),
            )),
        }
    }

    /// Whether the caller may see and act on a record owned by `owner` at
    /// all; when not, the record answers 404 (D46).
    pub fn reaches(&self, owner: Option<&UserId>) -> bool {
        match &self.reach {
            Reach::OrgWide => true,
            Reach::Owner(me) => owner == Some(me),
        }
    }

    /// Whether the caller holds `scope` for the purpose of passing it on
    /// (`admin` holds every scope, D22).
    fn holds(&self, scope: Scope) -> bool {
        self.scopes.satisfies(scope)
    }

    /// D46: a caller cannot put on an application or key a scope it does
    /// not hold itself (the OpenID Connect scopes excepted: they grant
    /// nothing but sign-in, D49), and only an organization-wide caller may
    /// put `applications:read`/`applications:write` on one.
    pub fn may_grant(&self, scopes: ScopeSet) -> Result<(), DomainError> {
        if let Some(missing) = scopes.without_identity().iter().find(|s| !self.holds(*s)) {
            return Err(DomainError::MissingScope(format!(
                "you cannot grant the {} scope: your credential does not hold it",
                missing.as_str()
            )));
        }
        if !scopes.intersect(management_scopes()).is_empty() && self.reach != Reach::OrgWide {
            return Err(DomainError::MissingScope(
                "only an admin or an organization-wide credential may grant applications:read or applications:write".into(),
            ));
        }
        Ok(())
    }

    /// D46: changing an application's redirect URIs or scopes, or rotating
    /// its secret, needs every scope it is registered for (`openid`,
    /// `profile`, `email` excepted), and `admin` when it is `admin_approved`.
    pub fn may_reconfigure(&self, app: &Client) -> Result<(), DomainError> {
        let mut needed = app.scopes.without_identity().without(Scope::Admin);
        if app.admin_approved {
            needed.insert(Scope::Admin);
        }
        match needed.iter().find(|s| !self.holds(*s)) {
            None => Ok(()),
            Some(missing) => Err(DomainError::MissingScope(format!(
                "changing this application's redirect URIs, scopes or secret needs every scope it is registered for; your credential lacks {}",
                missing.as_str()
            ))),
        }
    }
}

/// D46: the longest grace a rotated secret may keep working (7 days).
pub const MAX_SECRET_GRACE_SECS: u64 = 7 * 24 * 3600;

/// D46: how long usage counts are kept.
pub const USAGE_RETENTION_DAYS: i64 = 30;

/// A range of whole UTC minutes of usage, `[from, to)` (D46): at most 24
/// hours, by default the last hour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageRange {
    /// The first minute, as Unix minutes.
    pub from_minute: i64,
    /// The minute after the last one, as Unix minutes.
    pub to_minute: i64,
}

impl UsageRange {
    /// The most minutes one request may ask for (24 hours).
    pub const MAX_MINUTES: i64 = 24 * 60;

    /// The range `from`..`to` (either may be absent), checked: `to` defaults
    /// to the minute after `now`'s (the current minute included), `from` to
    /// an hour before `to`. Bounds are rounded down to whole minutes
    /// (`to` up, so a `to` inside a minute covers it).
    pub fn new(
        from: Option<Timestamp>,
        to: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Self, DomainError> {
        let minute_floor = |t: Timestamp| t.millis().div_euclid(60_000);
        let minute_ceil = |t: Timestamp| (t.millis() + 59_999).div_euclid(60_000);
        let to_minute = to.map_or(minute_floor(now) + 1, minute_ceil);
        let from_minute = from.map_or(to_minute - 60, minute_floor);
        let issue = |field: &str, issue: &str| {
            Err(DomainError::Validation(vec![FieldIssue::new(field, issue)]))
        };
        if from_minute >= to_minute {
            return issue("from", "must be before to");
        }
        if to_minute - from_minute > Self::MAX_MINUTES {
            return issue("to", "must be at most 24 hours after from");
        }
        Ok(Self {
            from_minute,
            to_minute,
        })
    }

    /// Every minute of the range, oldest first.
    pub fn minutes(self) -> impl Iterator<Item = i64> {
        self.from_minute..self.to_minute
    }
}

/// D46: the key's prefix shown to recognise it (its first 12 characters).
pub fn key_prefix(key: &str) -> String {
    key.chars().take(crate::ApiKey::PREFIX_LEN).collect()
}

/// D46: what a person's new role leaves of the scopes of a key or an
/// application they own: the role's caps (D29); `None` when nothing
/// needs to change.
pub fn scopes_left_by_role(scopes: ScopeSet, role: Role) -> Option<ScopeSet> {
    let left = scopes.intersect(ScopeSet::for_role(role));
    (left != scopes).then_some(left)
}

/// D46 (revised): what a change from `old` to `new` does to the
/// applications `old` owns: `Some(true)` suspends them (the owner was
/// deactivated), `Some(false)` lifts that suspension (active again),
/// `None` leaves them as they are.
pub fn owner_inactive_after(old: &User, new: &User) -> Option<bool> {
    let (was, is) = (
        old.status == UserStatus::Inactive,
        new.status == UserStatus::Inactive,
    );
    (was != is).then_some(is)
}

/// D46: what a change to a person does to the API keys they own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyCut {
    /// Every key they own is revoked (they were deleted or deactivated).
    All,
    /// Their keys carrying a scope outside this set are revoked (they
    /// were demoted to a role with these caps).
    Beyond(ScopeSet),
}

/// D46: the cut a change from `old` to `new` (`None`: deleted) makes in the
/// keys `old` owns; `None` when they keep them all.
pub fn owned_keys_cut(old: &User, new: Option<&User>) -> Option<KeyCut> {
    let Some(new) = new else {
        return Some(KeyCut::All);
    };
    if new.status != UserStatus::Active && old.status == UserStatus::Active {
        return Some(KeyCut::All);
    }
    let cap = ScopeSet::for_role(new.role);
    (!ScopeSet::for_role(old.role).is_subset(cap)).then_some(KeyCut::Beyond(cap))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClientId, OrgId};

    fn set(s: &str) -> ScopeSet {
        ScopeSet::parse(s).unwrap()
    }

    fn app(scopes: &str, approved: bool) -> Client {
        Client {
            id: ClientId::generate(),
            org: OrgId::generate(),
            name: "a".into(),
            secret_hash: Some([0; 32]),
            previous_secret: None,
            scopes: set(scopes),
            redirect_uris: vec![],
            post_logout_redirect_uris: vec![],
            admin_approved: approved,
            owner: None,
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
            suspension: crate::client::Suspension::NONE,
        }
    }

    #[test]
    fn d46_an_editor_reaches_only_what_it_owns_an_admin_everything() {
        let me = UserId::generate();
        let other = UserId::generate();
        let editor = Manager::person(ScopeSet::for_role(Role::Editor), me.clone(), Role::Editor);
        assert!(editor.reaches(Some(&me)));
        assert!(!editor.reaches(Some(&other)));
        assert!(
            !editor.reaches(None),
            "an operator's application is not the editor's"
        );
        assert_eq!(editor.owner(), Some(&me));
        let admin = Manager::person(ScopeSet::for_role(Role::Admin), me.clone(), Role::Admin);
        assert!(admin.reaches(Some(&other)) && admin.reaches(None));
        assert!(Manager::credential(set("applications:read"), None).reaches(Some(&other)));
    }

    #[test]
    fn d46_revised_what_anyone_creates_has_an_owner_and_only_org_wide_callers_move_it() {
        let me = UserId::generate();
        let admin = Manager::person(ScopeSet::for_role(Role::Admin), me.clone(), Role::Admin);
        assert_eq!(admin.owner(), Some(&me), "an admin owns what it creates");
        let key = Manager::credential(set("applications:write"), Some(me.clone()));
        assert_eq!(key.owner(), Some(&me), "a credential's owner owns it");
        assert_eq!(Manager::credential(set("admin"), None).owner(), None);
        assert_eq!(Manager::operator().owner(), None);
        assert!(admin.may_move().is_ok() && key.may_move().is_ok());
        let editor = Manager::person(ScopeSet::for_role(Role::Editor), me, Role::Editor);
        assert!(matches!(
            editor.may_move(),
            Err(DomainError::MissingScope(_))
        ));
    }

    #[test]
    fn d46_revised_deactivation_suspends_owned_applications_and_return_lifts_it() {
        let active = User {
            id: UserId::generate(),
            email: crate::Email::parse("o@b.co").unwrap(),
            name: crate::Name::parse("O").unwrap(),
            role: Role::Editor,
            status: UserStatus::Active,
            created_at: Timestamp::now(),
            updated_at: Timestamp::now(),
            has_password: true,
        };
        let mut inactive = active.clone();
        inactive.status = UserStatus::Inactive;
        let mut pending = active.clone();
        pending.status = UserStatus::PendingInvite;
        assert_eq!(owner_inactive_after(&active, &inactive), Some(true));
        assert_eq!(owner_inactive_after(&inactive, &active), Some(false));
        assert_eq!(owner_inactive_after(&active, &active), None);
        assert_eq!(owner_inactive_after(&pending, &inactive), Some(true));
        assert_eq!(owner_inactive_after(&pending, &active), None);
    }

    #[test]
    fn d46_no_escalation_and_applications_scopes_only_from_org_wide_callers() {
        let editor = Manager::person(
            ScopeSet::for_role(Role::Editor),
            UserId::generate(),
            Role::Editor,
        );
        assert!(editor.may_grant(set("products:write openid email")).is_ok());
        assert!(matches!(
            editor.may_grant(set("users:write")),
            Err(DomainError::MissingScope(m)) if m.contains("users:write")
        ));
        assert!(matches!(
            editor.may_grant(set("applications:read")),
            Err(DomainError::MissingScope(_))
        ));
        let cc = Manager::credential(set("applications:write applications:read users:read"), None);
        assert!(cc.may_grant(set("applications:read users:read")).is_ok());
        assert!(
            cc.may_grant(set("users:read admin")).is_err(),
            "admin is not held"
        );
        assert!(Manager::operator().may_grant(ScopeSet::all()).is_ok());
    }

    #[test]
    fn d46_reconfiguring_needs_every_registered_scope_and_admin_when_approved() {
        let cc = Manager::credential(set("applications:write products:read openid"), None);
        assert!(
            cc.may_reconfigure(&app("products:read openid profile email", false))
                .is_ok()
        );
        assert!(
            cc.may_reconfigure(&app("products:read users:read", false))
                .is_err()
        );
        // `admin` listed but not approved grants nothing: not needed.
        assert!(
            cc.may_reconfigure(&app("products:read admin", false))
                .is_ok()
        );
        assert!(
            cc.may_reconfigure(&app("products:read admin", true))
                .is_err()
        );
        let admin = Manager::credential(set("admin"), None);
        assert!(
            admin
                .may_reconfigure(&app("users:write admin", true))
                .is_ok()
        );
    }

    #[test]
    fn d46_usage_ranges_default_to_the_last_hour_and_stop_at_a_day() {
        let now = Timestamp::from_millis(1_000 * 60_000 + 30_000);
        let r = UsageRange::new(None, None, now).unwrap();
        assert_eq!((r.from_minute, r.to_minute), (941, 1001));
        assert_eq!(r.minutes().count(), 60);
        let from = Timestamp::from_millis(0);
        assert!(
            UsageRange::new(
                Some(from),
                Some(Timestamp::from_millis(24 * 3_600_000)),
                now
            )
            .is_ok()
        );
        assert!(
            UsageRange::new(
                Some(from),
                Some(Timestamp::from_millis(24 * 3_600_000 + 1)),
                now
            )
            .is_err()
        );
        let whole = Timestamp::from_millis(1_000 * 60_000);
        assert!(UsageRange::new(Some(whole), Some(whole), now).is_err());
        assert!(
            UsageRange::new(Some(now), Some(whole), now).is_err(),
            "from after to"
        );
    }

    #[test]
    fn d46_a_demotion_takes_away_what_the_new_role_lacks() {
        let s = set("products:write applications:read users:read");
        assert_eq!(
            scopes_left_by_role(s, Role::Viewer),
            Some(set("users:read"))
        );
        assert_eq!(scopes_left_by_role(s, Role::Editor), None);
        assert_eq!(
            scopes_left_by_role(set("users:read admin"), Role::Admin),
            None
        );
        assert_eq!(
            scopes_left_by_role(set("users:read admin"), Role::Editor),
            Some(set("users:read"))
        );
    }
}
