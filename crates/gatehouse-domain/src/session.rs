//! Browser sessions (D57): what a sign-in leaves in the browser (the
//! single-sign-on cookie) and what a person and an admin see and end.
//!
//! A session has two lives. Its *browser sign-in* ends after
//! `GATEHOUSE_SESSION_IDLE` without browser use or `GATEHOUSE_SESSION_MAX`
//! after it began ([`SessionLimits`]); that expiry revokes nothing. The
//! refresh chains begun in it keep D24's lifetimes, and the session stays
//! listed (and can be ended) until the browser sign-in and every one of
//! them have ended. Only an explicit end ([`SessionSelect`], applied by
//! `effect::Effect::EndSessions`) revokes the chains begun in it and tells
//! `session.revoked`.

use crate::ids::{ClientId, OrgId, SessionId, UserId};
use crate::time::Timestamp;

const DAY: i64 = 86_400;

/// How long a browser sign-in lasts (D57, D40 continued).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// `GATEHOUSE_SESSION_IDLE`: without browser use for this long, the
    /// browser sign-in ends.
    pub idle_secs: i64,
    /// `GATEHOUSE_SESSION_MAX`: this long after it began, it ends whatever
    /// the use.
    pub max_secs: i64,
}

impl Default for SessionLimits {
    /// D40 (continued): 14 days idle, 90 days in all.
    fn default() -> Self {
        Self {
            idle_secs: 14 * DAY,
            max_secs: 90 * DAY,
        }
    }
}

impl SessionLimits {
    /// When a browser sign-in that began at `created_at` and was last used
    /// by the browser at `used_at` ends.
    pub fn browser_until(&self, created_at: Timestamp, used_at: Timestamp) -> Timestamp {
        let idle = used_at.plus_seconds(self.idle_secs);
        let max = created_at.plus_seconds(self.max_secs);
        if idle < max { idle } else { max }
    }

    /// D57: `last_seen_at` is written at most once a minute. Under
    /// `--test-settings` an idle time below four minutes shortens the step
    /// to a quarter of it, so that a test's browser use can keep a
    /// seconds-long sign-in alive (docs/security.md).
    pub fn seen_step_secs(&self) -> i64 {
        (self.idle_secs / 4).clamp(1, SEEN_EVERY_SECS)
    }

    /// The seconds a session cookie may live in the browser: the longest a
    /// browser sign-in can last (the server decides when it really ends).
    pub fn cookie_max_age(&self) -> i64 {
        self.max_secs
    }
}

/// D57: `last_seen_at` is written at most this often.
pub const SEEN_EVERY_SECS: i64 = 60;

/// Where a browser used a session from: its address (after D28's proxy
/// rules) and its `User-Agent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrowserUse {
    pub ip: String,
    pub user_agent: Option<String>,
}

/// The longest `User-Agent` kept; a longer one is cut (at a character
/// boundary).
pub const USER_AGENT_MAX: usize = 512;

impl BrowserUse {
    pub fn new(ip: impl Into<String>, user_agent: Option<&str>) -> Self {
        let user_agent = user_agent.map(|ua| {
            let mut end = ua.len().min(USER_AGENT_MAX);
            while !ua.is_char_boundary(end) {
                end -= 1;
            }
            ua[..end].to_owned()
        });
        Self {
            ip: ip.into(),
            user_agent,
        }
    }
}

/// A browser session (D57).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// `ses_…`: the `sid` of its ID tokens (D49).
    pub id: SessionId,
    pub org: OrgId,
    pub user: UserId,
    /// When the person signed in: OpenID Connect's `auth_time` (D49).
    pub created_at: Timestamp,
    /// The latest browser use or refresh of a chain begun in it, written at
    /// most once a minute ([`SessionLimits::seen_step_secs`]).
    pub last_seen_at: Timestamp,
    /// When the browser sign-in ends ([`SessionLimits::browser_until`]).
    pub expires_at: Timestamp,
    /// Of the latest browser use (the sign-in's until then).
    pub ip: Option<String>,
    pub user_agent: Option<String>,
    /// How the person signed in (RFC 8176 values): `["pwd"]` for a password,
    /// raised by a step-up (D56).
    pub amr: Vec<String>,
    /// When the person last authenticated in it: the sign-in, or the
    /// latest step-up (D56's `auth_time`).
    pub auth_time: Timestamp,
    /// The applications with live refresh chains begun in the session,
    /// filled where sessions are listed or ended (empty elsewhere).
    pub applications: Vec<ClientId>,
}

impl Session {
    /// The session a sign-in by password begins at `now`.
    pub fn signed_in(
        org: &OrgId,
        user: &UserId,
        browser: &BrowserUse,
        limits: &SessionLimits,
        now: Timestamp,
    ) -> Self {
        Self {
            id: SessionId::generate(),
            org: org.clone(),
            user: user.clone(),
            created_at: now,
            last_seen_at: now,
            expires_at: limits.browser_until(now, now),
            ip: Some(browser.ip.clone()),
            user_agent: browser.user_agent.clone(),
            amr: crate::mfa::amr_password(),
            auth_time: now,
            applications: Vec::new(),
        }
    }

    /// Whether the browser sign-in (the cookie) still signs the person in.
    pub fn browser_live(&self, now: Timestamp) -> bool {
        self.expires_at > now
    }

    /// What a browser use at `now` writes, if anything (D57): the use
    /// (`last_seen_at`) and the browser sign-in's new end at most once per
    /// step; the address and agent whenever they changed (without moving
    /// `last_seen_at` between steps). `None`: nothing to write.
    pub fn browser_use(
        &self,
        browser: &BrowserUse,
        limits: &SessionLimits,
        now: Timestamp,
    ) -> Option<Session> {
        let due = now.millis() - self.last_seen_at.millis() >= limits.seen_step_secs() * 1000;
        let moved = self.ip.as_deref() != Some(browser.ip.as_str())
            || self.user_agent != browser.user_agent;
        let (seen, until) = if due {
            (now, limits.browser_until(self.created_at, now))
        } else {
            (self.last_seen_at, self.expires_at)
        };
        (due || moved).then(|| Session {
            last_seen_at: seen,
            expires_at: until,
            ip: Some(browser.ip.clone()),
            user_agent: browser.user_agent.clone(),
            ..self.clone()
        })
    }
}

/// Which of a person's sessions an explicit end reaches (D57).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionSelect {
    /// One session (`DELETE …/sessions/{ses_id}`, sign-out, logout).
    One(SessionId),
    /// Every session but this one (`revoke-others`, a password change).
    AllBut(SessionId),
    /// Every session (the admin's `DELETE /v1/users/{id}/sessions`, a
    /// reset, deactivation, deletion).
    All,
}

impl SessionSelect {
    /// Whether the session `id` is one this selection ends.
    pub fn reaches(&self, id: &SessionId) -> bool {
        match self {
            SessionSelect::One(one) => one == id,
            SessionSelect::AllBut(kept) => kept != id,
            SessionSelect::All => true,
        }
    }
}

/// The `amr` as stored: the values separated by spaces.
pub fn amr_to_text(amr: &[String]) -> String {
    amr.join(" ")
}

/// The `amr` from its stored text.
pub fn amr_from_text(text: &str) -> Vec<String> {
    text.split(' ')
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(1_700_000_000_000 + secs * 1000)
    }

    fn browser() -> BrowserUse {
        BrowserUse::new("192.0.2.1", Some("Firefox"))
    }

    #[test]
    fn the_browser_sign_in_ends_after_idle_or_max_whichever_comes_first() {
        let limits = SessionLimits {
            idle_secs: 10,
            max_secs: 25,
        };
        assert_eq!(limits.browser_until(at(0), at(0)), at(10));
        assert_eq!(limits.browser_until(at(0), at(12)), at(22));
        // Use keeps it alive only up to the absolute end.
        assert_eq!(limits.browser_until(at(0), at(20)), at(25));
    }

    #[test]
    fn a_use_is_written_at_most_once_a_step_unless_the_browser_moved() {
        let limits = SessionLimits::default();
        let org = OrgId::generate();
        let user = UserId::generate();
        let s = Session::signed_in(&org, &user, &browser(), &limits, at(0));
        assert_eq!(s.amr, vec!["pwd".to_owned()]);
        assert!(s.id.as_str().starts_with("ses_"));
        assert!(s.browser_use(&browser(), &limits, at(59)).is_none());
        let later = s.browser_use(&browser(), &limits, at(60)).unwrap();
        assert_eq!(later.last_seen_at, at(60));
        assert_eq!(later.expires_at, at(60 + 14 * DAY));
        let moved = BrowserUse::new("198.51.100.7", Some("Firefox"));
        let seen = s.browser_use(&moved, &limits, at(5)).unwrap();
        assert_eq!(seen.ip.as_deref(), Some("198.51.100.7"));
        assert_eq!(seen.created_at, s.created_at);
        // `last_seen_at` still moves at most once a minute.
        assert_eq!(seen.last_seen_at, s.last_seen_at);
        assert_eq!(seen.expires_at, s.expires_at);
    }

    #[test]
    fn short_test_settings_shorten_the_step() {
        let limits = SessionLimits {
            idle_secs: 8,
            max_secs: 30,
        };
        assert_eq!(limits.seen_step_secs(), 2);
        assert_eq!(SessionLimits::default().seen_step_secs(), 60);
    }

    #[test]
    fn a_long_user_agent_is_cut_at_a_character_boundary() {
        let ua = "é".repeat(400);
        let b = BrowserUse::new("::1", Some(&ua));
        let kept = b.user_agent.unwrap();
        assert!(kept.len() <= USER_AGENT_MAX);
        assert!(ua.starts_with(&kept));
    }

    #[test]
    fn selections_reach_what_they_name() {
        let (a, b) = (SessionId::generate(), SessionId::generate());
        assert!(SessionSelect::One(a.clone()).reaches(&a));
        assert!(!SessionSelect::One(a.clone()).reaches(&b));
        assert!(!SessionSelect::AllBut(a.clone()).reaches(&a));
        assert!(SessionSelect::AllBut(a.clone()).reaches(&b));
        assert!(SessionSelect::All.reaches(&b));
        assert_eq!(amr_from_text(&amr_to_text(&["pwd".into()])), vec!["pwd"]);
    }
}
