//! Webhooks (D55), the rules without I/O: an endpoint's input, the address
//! rules against server-side request forgery, the retry schedule and what an
//! attempt's answer means. The signature (keys) lives in `gatehouse-auth`,
//! the delivery (sockets, DNS) in the application's worker; both call these.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ipnet::IpNet;

use crate::event::{EventType, TypePattern};
use crate::ids::{AttemptId, EndpointId, EventId, UserId};
use crate::time::Timestamp;
use crate::user::{Role, User, UserStatus};

/// Endpoints per organization at most, disabled ones included (D55).
pub const MAX_ENDPOINTS: usize = 16;
/// An endpoint URL's length at most, in characters (D55).
pub const MAX_URL_CHARS: usize = 2_048;
/// A `description`'s length at most, in characters (D55).
pub const MAX_DESCRIPTION_CHARS: usize = 500;
/// `enabled_events` patterns at most (D55).
pub const MAX_PATTERNS: usize = 50;
/// Bytes of an answer read at most, and kept as its excerpt (D55).
pub const MAX_RESPONSE_BYTES: usize = 4_096;
/// A rotation's grace: the default and the most (D55).
pub const DEFAULT_GRACE_SECS: u32 = 86_400;
pub const MAX_GRACE_SECS: u32 = 604_800;
/// The default `GATEHOUSE_WEBHOOK_RETRY_SCHEDULE` (D40 continued): the waits
/// before the 2nd to the 10th attempt.
pub const DEFAULT_RETRY_SCHEDULE: &str = "5s,5m,30m,2h,5h,10h,14h,20h,24h";

/// Why an endpoint URL is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// D55's input rules: 400 `VALIDATION_ERROR` on the field `url`.
    #[error("{0}")]
    Invalid(&'static str),
    /// D55's address rules: 422 `URL_NOT_ALLOWED`.
    #[error(
        "webhooks are not delivered to {0}: a loopback, private, link-local, shared, multicast, reserved or unspecified address"
    )]
    NotAllowed(IpAddr),
}

/// The address ranges an operator allows despite the address rules
/// (`GATEHOUSE_WEBHOOK_ALLOW_CIDRS`, `--webhook-allow-cidrs`), to which plain
/// `http` is allowed too. Empty by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList(Vec<IpNet>);

impl AllowList {
    /// Ranges separated by commas or white space (`127.0.0.0/8, ::1/128`).
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>()
                    .map(|n| n.trunc())
                    .map_err(|_| format!("{s:?} is not an address range such as 127.0.0.0/8"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ip` (or the IPv4 address it carries) lies in an allowed range.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let canonical = canonical(ip);
        self.0
            .iter()
            .any(|n| n.contains(&ip) || n.contains(&canonical))
    }
}

/// D55's address rules: whether a delivery may connect to `ip`. Checked at
/// create and update for every address the host resolves to, and again on
/// the address a connection is made to.
pub fn address_allowed(ip: IpAddr, allow: &AllowList) -> bool {
    allow.permits(ip) || !is_special(ip)
}

/// A loopback, private (RFC 1918, IPv6 unique local), link-local, shared
/// (100.64.0.0/10), multicast, reserved or unspecified address; an IPv6
/// address that carries an IPv4 one (IPv4-mapped, IPv4-compatible, NAT64)
/// is judged by it. Every IPv6 address outside global unicast (2000::/3) is
/// reserved.
pub fn is_special(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

/// The IPv4 address an IPv6 one carries (`::ffff:a.b.c.d`, `::a.b.c.d`,
/// `64:ff9b::a.b.c.d`), else `ip` itself.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let embedded = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    // IPv4-compatible (deprecated), but not `::` and `::1` themselves.
    if s[..6].iter().all(|&x| x == 0) && !(s[6] == 0 && s[7] <= 1) {
        return IpAddr::V4(embedded());
    }
    // NAT64's well-known prefix.
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6].iter().all(|&x| x == 0) {
        return IpAddr::V4(embedded());
    }
    ip
}

fn special_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || o[0] == 0 // 0.0.0.0/8, "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10, shared
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24, protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15, benchmarking
        || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 192.88.99.0/24, 6to4 relays
        || o[0] >= 240 // 240.0.0.0/4, reserved
}

fn special_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    (s[0] & 0xe000) != 0x2000 // outside global unicast: ::, ::1, ULA, link-local, multicast …
        || (s[0] == 0x2001 && s[1] < 0x0200) // 2001::/23, protocol assignments (Teredo included)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x3fff && (s[1] & 0xf000) == 0) // 3fff::/20, documentation (RFC 9637)
        || s[0] == 0x2002 // 6to4: carries an IPv4 address of any kind
}

/// An endpoint's host as its URL names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    Domain(String),
}

/// An endpoint URL that passed D55's input rules. A domain's addresses are
/// checked when it is resolved ([`EndpointUrl::check_resolved`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointUrl {
    url: url::Url,
    host: Host,
}

impl EndpointUrl {
    /// D55's input rules (400) and, for an address written in the URL, its
    /// address rules (422). Plain `http` is accepted only to an allowed
    /// range (for a domain: when all its addresses are in one, checked at
    /// resolution).
    pub fn parse(raw: &str, allow: &AllowList) -> Result<Self, UrlError> {
        let (url, host) = Self::syntax(raw).map_err(UrlError::Invalid)?;
        if let Host::Ip(ip) = host {
            if !address_allowed(ip, allow) {
                return Err(UrlError::NotAllowed(ip));
            }
            if url.scheme() != "https" && !allow.permits(ip) {
                return Err(UrlError::Invalid("must be an https URL"));
            }
        }
        Ok(Self { url, host })
    }

    /// D55's input rules that need no configuration (a request body's
    /// check, before the allow-list and the address rules): at most 2,048
    /// characters, an absolute `https` (or plain `http`) URL with a host
    /// and no user-info.
    pub fn check_syntax(raw: &str) -> Result<(), &'static str> {
        Self::syntax(raw).map(|_| ())
    }

    fn syntax(raw: &str) -> Result<(url::Url, Host), &'static str> {
        if raw.chars().count() > MAX_URL_CHARS {
            return Err("must be at most 2,048 characters");
        }
        let url = url::Url::parse(raw).map_err(|_| "must be an absolute URL")?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err("must be an https URL");
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("must not contain user information");
        }
        let host = match url.host() {
            Some(url::Host::Ipv4(a)) => Host::Ip(IpAddr::V4(a)),
            Some(url::Host::Ipv6(a)) => Host::Ip(IpAddr::V6(a)),
            Some(url::Host::Domain(d)) if !d.is_empty() => Host::Domain(d.to_owned()),
            _ => return Err("must name a host"),
        };
        Ok((url, host))
    }

    /// The addresses a domain resolved to, under the address rules: the
    /// first refused one is the error; plain `http` needs them all in an
    /// allowed range.
    pub fn check_resolved(&self, addresses: &[IpAddr], allow: &AllowList) -> Result<(), UrlError> {
        if let Some(ip) = addresses.iter().find(|ip| !address_allowed(**ip, allow)) {
            return Err(UrlError::NotAllowed(*ip));
        }
        // Plain http needs every address in an allowed range, and at least
        // one (a name that does not resolve proves nothing).
        if !self.is_https()
            && (addresses.is_empty() || !addresses.iter().all(|ip| allow.permits(*ip)))
        {
            return Err(UrlError::Invalid("must be an https URL"));
        }
        Ok(())
    }

    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    pub fn host(&self) -> &Host {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.url.port_or_known_default().unwrap_or(443)
    }

    pub fn is_https(&self) -> bool {
        self.url.scheme() == "https"
    }
}

/// The host a stored endpoint URL names (for messages that must not show
/// the whole URL, which may carry a credential of the receiver's).
pub fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A `description` (D55): at most 500 characters.
pub fn parse_description(raw: &str) -> Result<String, String> {
    if raw.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err("must be at most 500 characters".into());
    }
    Ok(raw.to_owned())
}

/// `enabled_events` (D55): at most 50 patterns, each matching a catalog type
/// (D54's `type` filter). Absent is `["*"]` (the caller's default).
pub fn parse_enabled_events(raw: &[String]) -> Result<Vec<TypePattern>, String> {
    if raw.len() > MAX_PATTERNS {
        return Err("must hold at most 50 patterns".into());
    }
    if raw.is_empty() {
        return Err("must hold at least one pattern (\"*\" for every event)".into());
    }
    raw.iter().map(|p| TypePattern::parse(p)).collect()
}

/// Whether an endpoint with `patterns` receives events of type `t`.
pub fn wants(patterns: &[TypePattern], t: EventType) -> bool {
    patterns.iter().any(|p| p.matches(t))
}

/// An endpoint's `ordering` (D55).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ordering {
    #[default]
    None,
    /// At most one undelivered event per ordering key (D54) at a time.
    PerObject,
}

impl Ordering {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "none" => Some(Self::None),
            "per_object" => Some(Self::PerObject),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::PerObject => "per_object",
        }
    }
}

/// Why an endpoint is disabled (D55); `None` while it is enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisabledReason {
    Manual,
    Gone,
    Failing,
    OwnerRemoved,
}

impl DisabledReason {
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "manual" => Some(Self::Manual),
            "gone" => Some(Self::Gone),
            "failing" => Some(Self::Failing),
            "owner_removed" => Some(Self::OwnerRemoved),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Gone => "gone",
            Self::Failing => "failing",
            Self::OwnerRemoved => "owner_removed",
        }
    }
}

/// A webhook endpoint as stored (its secrets apart: they are sealed under
/// the master key and never leave storage but to sign).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub id: EndpointId,
    pub url: String,
    pub description: String,
    pub enabled_events: Vec<TypePattern>,
    pub ordering: Ordering,
    /// `None` while enabled.
    pub disabled: Option<DisabledReason>,
    /// The user it answers to (D55, D46 revised); `None` for an endpoint
    /// whose owner is gone in staging (D33 continued) or that a credential
    /// without an owner made.
    pub owner: Option<UserId>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Endpoint {
    /// A new endpoint, enabled, owned by `owner` (D55, D46 revised: the
    /// caller's owner).
    pub fn new(
        url: &EndpointUrl,
        description: String,
        enabled_events: Vec<TypePattern>,
        ordering: Ordering,
        owner: Option<UserId>,
        at: Timestamp,
    ) -> Self {
        Self {
            id: EndpointId::generate(),
            url: url.as_str().to_owned(),
            description,
            enabled_events,
            ordering,
            disabled: None,
            owner,
            created_at: at,
            updated_at: at,
        }
    }

    pub fn status(&self) -> &'static str {
        if self.disabled.is_some() {
            "disabled"
        } else {
            "enabled"
        }
    }

    /// Whether the endpoint receives an event of type `t` now: enabled and
    /// matching `enabled_events` (none are created while it is disabled).
    pub fn receives(&self, t: EventType) -> bool {
        self.disabled.is_none() && wants(&self.enabled_events, t)
    }
}

/// A `PATCH` of an endpoint, parsed (D55): absent fields stay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub description: Option<String>,
    pub enabled_events: Option<Vec<TypePattern>>,
    pub ordering: Option<Ordering>,
    /// `status`: `Some(true)` enabled, `Some(false)` disabled.
    pub enabled: Option<bool>,
}

/// The endpoint after `patch`, sent by a caller whose owner (a user, or a
/// credential's owner as in D46) is `by`; `None` when nothing changes (D54:
/// no event). Enabling a disabled endpoint makes `by` its owner (D55);
/// disabling it is `manual`.
pub fn patched(
    current: &Endpoint,
    patch: &EndpointPatch,
    by: Option<&UserId>,
    at: Timestamp,
) -> Option<Endpoint> {
    let mut next = current.clone();
    if let Some(url) = &patch.url {
        next.url.clone_from(url);
    }
    if let Some(d) = &patch.description {
        next.description.clone_from(d);
    }
    if let Some(p) = &patch.enabled_events {
        next.enabled_events.clone_from(p);
    }
    if let Some(o) = patch.ordering {
        next.ordering = o;
    }
    match (patch.enabled, current.disabled) {
        (Some(true), Some(_)) => {
            next.disabled = None;
            next.owner = by.cloned();
        }
        (Some(false), None) => next.disabled = Some(DisabledReason::Manual),
        _ => {}
    }
    if next == *current {
        return None;
    }
    next.updated_at = at;
    Some(next)
}

/// The refusal of a 17th endpoint (D55: 422 `LIMIT_REACHED`).
pub fn limit_reached() -> crate::DomainError {
    crate::DomainError::LimitReached(format!(
        "an organization has at most {MAX_ENDPOINTS} webhook endpoints, disabled ones included; delete one first"
    ))
}

/// D55: whether a change of `current` into `next` (`None`: deleted) takes
/// away what an endpoint's owner needs, so the endpoints they own are
/// disabled (`owner_removed`): deleted, deactivated, or demoted below admin.
pub fn owner_removed(current: &User, next: Option<&User>) -> bool {
    let Some(next) = next else {
        return true;
    };
    let deactivated = current.status == UserStatus::Active && next.status != UserStatus::Active;
    let demoted = current.role == Role::Admin && next.role != Role::Admin;
    deactivated || demoted
}

/// The endpoint disabled for `reason` by the service (its owner removed,
/// `gone`, `failing`); `None` when it is disabled already (it keeps the
/// reason it has, and nothing is told).
pub fn disabled_for(current: &Endpoint, reason: DisabledReason, at: Timestamp) -> Option<Endpoint> {
    current.disabled.is_none().then(|| Endpoint {
        disabled: Some(reason),
        updated_at: at,
        ..current.clone()
    })
}

/// `GATEHOUSE_WEBHOOK_RETRY_SCHEDULE` (D55, D40 continued): the waits before
/// the 2nd, 3rd … attempt; an event has one attempt more than waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetrySchedule(Vec<Duration>);

impl Default for RetrySchedule {
    fn default() -> Self {
        Self::parse(DEFAULT_RETRY_SCHEDULE).expect("the default schedule parses")
    }
}

impl RetrySchedule {
    /// Waits separated by commas, each a whole number with a unit: `ms`,
    /// `s`, `m`, `h` or `d` (`5s,5m,30m,2h`). At least one.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let waits = raw
            .split(',')
            .map(str::trim)
            .map(|w| {
                let split = w.find(|c: char| !c.is_ascii_digit()).unwrap_or(w.len());
                let (n, unit) = w.split_at(split);
                let n: u64 = n
                    .parse()
                    .map_err(|_| format!("{w:?} is not a wait such as 5s, 5m or 2h"))?;
                let per = match unit {
                    "ms" => Duration::from_millis(1),
                    "s" => Duration::from_secs(1),
                    "m" => Duration::from_secs(60),
                    "h" => Duration::from_secs(3_600),
                    "d" => Duration::from_secs(86_400),
                    _ => return Err(format!("{w:?} is not a wait such as 5s, 5m or 2h")),
                };
                per.checked_mul(u32::try_from(n).map_err(|_| format!("{w:?} is too long"))?)
                    .ok_or_else(|| format!("{w:?} is too long"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if waits.is_empty() {
            return Err("needs at least one wait".into());
        }
        Ok(Self(waits))
    }

    /// One attempt and no retry (the mock's, D53 continued).
    pub fn single() -> Self {
        Self(Vec::new())
    }

    /// Attempts an event gets at most: the first, then one per wait.
    pub fn attempts(&self) -> u32 {
        self.0.len() as u32 + 1
    }

    /// The wait after attempt `attempt` (1 for the first) failed, `None`
    /// once the schedule is exhausted. `jitter` in [-1, 1] spreads the
    /// scheduled wait by ±20 %; a `Retry-After` (honoured on 429 and 503,
    /// [`honours_retry_after`]) sets the wait instead, clamped between the
    /// scheduled wait and twice it.
    pub fn wait_after(
        &self,
        attempt: u32,
        jitter: f64,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        let scheduled = *self.0.get(attempt.checked_sub(1)? as usize)?;
        Some(match retry_after {
            Some(asked) => asked.clamp(scheduled, scheduled.saturating_mul(2)),
            None => scheduled.mul_f64(1.0 + 0.2 * jitter.clamp(-1.0, 1.0)),
        })
    }
}

/// What an answer's status means for the delivery (D55).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Any 2xx.
    Succeeded,
    /// 410: the endpoint is disabled at once (`gone`).
    Gone,
    /// Anything else: retried on the schedule (a 3xx with `error: redirect`,
    /// never followed).
    Failed,
}

pub fn outcome_of(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Succeeded,
        410 => Outcome::Gone,
        _ => Outcome::Failed,
    }
}

/// Whether a `Retry-After` on an answer with `status` sets the next wait.
pub fn honours_retry_after(status: u16) -> bool {
    status == 429 || status == 503
}

/// D55: at most one "deliveries failing" e-mail per endpoint per 24 hours.
pub const FAILING_MAIL_EVERY_SECS: i64 = 86_400;

/// Whether an endpoint last e-mailed about at `last` may be e-mailed about
/// again at `now` (D55: at most once per 24 hours).
pub fn failing_mail_due(last: Option<Timestamp>, now: Timestamp) -> bool {
    last.is_none_or(|t| now >= t.plus_seconds(FAILING_MAIL_EVERY_SECS))
}

/// D55: an endpoint whose attempt failed at `now` is disabled (`failing`)
/// when it has had no successful attempt for `disable_after` since
/// `failing_since`, the first failed attempt after its last success (the
/// failure in the last 24 hours is the one at `now`).
pub fn failing_too_long(failing_since: Timestamp, disable_after: Duration, now: Timestamp) -> bool {
    let after = i64::try_from(disable_after.as_millis()).unwrap_or(i64::MAX);
    now >= failing_since.plus_millis(after)
}

/// What a failed attempt does to its endpoint beyond its own delivery
/// (D55), decided here once for every backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// Disabled, as this endpoint: `gone` after a 410, `failing` when it
    /// has had no success for `GATEHOUSE_WEBHOOK_DISABLE_AFTER`. Its
    /// pending deliveries are cancelled and `webhook_endpoint.disabled` is
    /// told.
    Disable(Endpoint),
    /// The event's schedule is spent and the admins were not told of this
    /// endpoint in the last 24 hours: they get the "deliveries failing"
    /// e-mail, and the time is kept.
    MailAdmins,
    /// Nothing more: the next attempt, or the next failure, decides.
    Nothing,
}

/// D55: after an attempt of `current` failed at `at` with `next` (anything
/// but [`Next::Done`], whose success ends the failing streak), the endpoint
/// failing since `failing_since` (this failure's time when it is the first)
/// and its admins last e-mailed at `mailed`.
pub fn after_failure(
    current: &Endpoint,
    next: Next,
    failing_since: Timestamp,
    mailed: Option<Timestamp>,
    disable_after: Duration,
    at: Timestamp,
) -> AfterFailure {
    let reason = if next == Next::Gone {
        Some(DisabledReason::Gone)
    } else if failing_too_long(failing_since, disable_after, at) {
        Some(DisabledReason::Failing)
    } else {
        None
    };
    if let Some(off) = reason.and_then(|r| disabled_for(current, r, at)) {
        AfterFailure::Disable(off)
    } else if next == Next::Exhausted && failing_mail_due(mailed, at) {
        AfterFailure::MailAdmins
    } else {
        AfterFailure::Nothing
    }
}

/// Why an attempt is made (D55's `trigger`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// A delivery of a sequenced event, and its retries.
    Scheduled,
    /// `test` and `redeliver`.
    Manual,
    /// `replay`.
    Replay,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Manual => "manual",
            Self::Replay => "replay",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "scheduled" => Some(Self::Scheduled),
            "manual" => Some(Self::Manual),
            "replay" => Some(Self::Replay),
            _ => None,
        }
    }
}

/// One attempt of the delivery log (D55): made (`started_at` set), or the
/// next one queued (`pending`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub id: AttemptId,
    pub endpoint: EndpointId,
    pub event: EventId,
    /// 1 for the first.
    pub attempt: u32,
    pub trigger: Trigger,
    pub started_at: Option<Timestamp>,
    pub duration_ms: Option<i64>,
    pub response_status: Option<u16>,
    pub error: Option<AttemptError>,
    /// At most 4 KiB of the answer.
    pub response_excerpt: Option<String>,
    /// When the next attempt is (or, queued, when this one is) due.
    pub next_attempt_at: Option<Timestamp>,
}

impl Attempt {
    /// `pending` (queued), `succeeded` (a 2xx) or `failed`.
    pub fn status(&self) -> &'static str {
        match (self.started_at, self.error, self.response_status) {
            (_, Some(_), _) => "failed",
            (None, None, _) => "pending",
            (Some(_), None, Some(200..=299)) => "succeeded",
            (Some(_), None, _) => "failed",
        }
    }
}

/// What follows an attempt (D55).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A 2xx: the delivery is done.
    Done,
    /// Another attempt at this time.
    RetryAt(Timestamp),
    /// The schedule is spent: the delivery failed.
    Exhausted,
    /// A 410: the endpoint is disabled (`gone`) at once.
    Gone,
}

/// What follows attempt `attempt` (1 for the first) made at `now`, that got
/// `status` (none: it failed before an answer) and maybe a `Retry-After`
/// (honoured on 429 and 503 only); `jitter` in [-1, 1].
pub fn next_step(
    schedule: &RetrySchedule,
    attempt: u32,
    status: Option<u16>,
    retry_after: Option<Duration>,
    jitter: f64,
    now: Timestamp,
) -> Next {
    match status.map(outcome_of) {
        Some(Outcome::Succeeded) => return Next::Done,
        Some(Outcome::Gone) => return Next::Gone,
        _ => {}
    }
    let asked = retry_after.filter(|_| status.is_some_and(honours_retry_after));
    match schedule.wait_after(attempt, jitter, asked) {
        Some(wait) => {
            Next::RetryAt(now.plus_millis(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX)))
        }
        None => Next::Exhausted,
    }
}

/// An attempt's `error` (D55), when it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptError {
    Timeout,
    Connect,
    Tls,
    Dns,
    BlockedAddress,
    Redirect,
    Cancelled,
}

impl AttemptError {
    /// The error an answer's status is, if any (a 3xx is a redirect).
    pub fn of_status(status: u16) -> Option<Self> {
        (300..=399).contains(&status).then_some(Self::Redirect)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Connect => "connect",
            Self::Tls => "tls",
            Self::Dns => "dns",
            Self::BlockedAddress => "blocked_address",
            Self::Redirect => "redirect",
            Self::Cancelled => "cancelled",
        }
    }
    pub fn parse(raw: &str) -> Option<Self> {
        [
            Self::Timeout,
            Self::Connect,
            Self::Tls,
            Self::Dns,
            Self::BlockedAddress,
            Self::Redirect,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|e| e.as_str() == raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn special_addresses_are_refused_public_ones_pass() {
        for s in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2001:db8::1",
            "2001::1",
            "2002:7f00:1::1",
            "100::1",
            "3fff::1",
            "3fff:fff::1",
            "192.88.99.1",
        ] {
            assert!(is_special(ip(s)), "{s} is special");
            assert!(
                !address_allowed(ip(s), &AllowList::default()),
                "{s} refused"
            );
        }
        for s in [
            "93.184.216.34",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:93.184.216.34",
            "64:ff9b::808:808",
            "3ffe::1",
            "192.88.100.1",
        ] {
            assert!(!is_special(ip(s)), "{s} is public");
            assert!(address_allowed(ip(s), &AllowList::default()), "{s} allowed");
        }
    }

    #[test]
    fn the_allow_list_opens_its_ranges_and_plain_http_to_them() {
        let allow = AllowList::parse("127.0.0.0/8, ::1/128").unwrap();
        assert!(address_allowed(ip("127.0.0.1"), &allow));
        assert!(address_allowed(ip("::ffff:127.0.0.2"), &allow));
        assert!(address_allowed(ip("::1"), &allow));
        assert!(!address_allowed(ip("10.0.0.1"), &allow));
        assert!(EndpointUrl::parse("http://127.0.0.1:8080/hook", &allow).is_ok());
        assert_eq!(
            EndpointUrl::parse("http://127.0.0.1:8080/hook", &AllowList::default()),
            Err(UrlError::NotAllowed(ip("127.0.0.1")))
        );
        assert_eq!(
            EndpointUrl::parse("http://93.184.216.34/hook", &allow),
            Err(UrlError::Invalid("must be an https URL"))
        );
        assert!(AllowList::parse("127.0.0.0/33").is_err());
        assert!(AllowList::parse("").unwrap().is_empty());
    }

    #[test]
    fn endpoint_urls_follow_the_input_rules() {
        let none = AllowList::default();
        let ok = EndpointUrl::parse("https://hooks.example.com/in?x=1", &none).unwrap();
        assert_eq!(ok.host(), &Host::Domain("hooks.example.com".into()));
        assert_eq!(ok.port(), 443);
        for (raw, why) in [
            ("ftp://example.com/", "must be an https URL"),
            (
                "https://user:pw@example.com/",
                "must not contain user information",
            ),
            (
                "https://user@example.com/",
                "must not contain user information",
            ),
            ("/relative", "must be an absolute URL"),
            ("not a url", "must be an absolute URL"),
            ("http://example.com/", "must be an https URL"),
        ] {
            let got = EndpointUrl::parse(raw, &none);
            if raw == "http://example.com/" {
                // A domain with plain http: refused once resolved.
                let url = got.unwrap();
                assert_eq!(
                    url.check_resolved(&[ip("93.184.216.34")], &none),
                    Err(UrlError::Invalid(why))
                );
            } else {
                assert_eq!(got, Err(UrlError::Invalid(why)), "{raw}");
            }
        }
        let long = format!("https://example.com/{}", "a".repeat(2_048));
        assert_eq!(
            EndpointUrl::parse(&long, &none),
            Err(UrlError::Invalid("must be at most 2,048 characters"))
        );
        assert_eq!(
            EndpointUrl::parse("https://[::ffff:10.0.0.1]/", &none),
            Err(UrlError::NotAllowed(ip("::ffff:10.0.0.1")))
        );
        assert_eq!(
            EndpointUrl::parse("https://169.254.169.254/latest", &none),
            Err(UrlError::NotAllowed(ip("169.254.169.254")))
        );
        // A domain is judged by what it resolves to: any refused address
        // refuses it.
        assert_eq!(
            ok.check_resolved(&[ip("93.184.216.34"), ip("10.0.0.1")], &none),
            Err(UrlError::NotAllowed(ip("10.0.0.1")))
        );
        assert_eq!(ok.check_resolved(&[ip("93.184.216.34")], &none), Ok(()));
        // Plain http to a name that resolved to nothing is not allowed.
        let allow = AllowList::parse("127.0.0.0/8").unwrap();
        let plain = EndpointUrl::parse("http://hooks.internal/", &allow).unwrap();
        assert_eq!(plain.check_resolved(&[ip("127.0.0.1")], &allow), Ok(()));
        assert_eq!(
            plain.check_resolved(&[], &allow),
            Err(UrlError::Invalid("must be an https URL"))
        );
    }

    #[test]
    fn descriptions_and_patterns() {
        assert!(parse_description(&"é".repeat(500)).is_ok());
        assert!(parse_description(&"é".repeat(501)).is_err());
        let p = parse_enabled_events(&["user.*".into(), "product.created".into()]).unwrap();
        assert!(wants(&p, EventType::UserDeleted));
        assert!(wants(&p, EventType::ProductCreated));
        assert!(!wants(&p, EventType::ProductDeleted));
        assert!(parse_enabled_events(&["usr.*".into()]).is_err());
        assert!(parse_enabled_events(&[]).is_err());
        assert!(parse_enabled_events(&vec!["*".to_owned(); 51]).is_err());
        assert!(parse_enabled_events(&vec!["*".to_owned(); 50]).is_ok());
    }

    #[test]
    fn the_schedule_parses_jitters_and_honours_retry_after() {
        let s = RetrySchedule::default();
        assert_eq!(s.attempts(), 10);
        assert_eq!(s.wait_after(1, 0.0, None), Some(Duration::from_secs(5)));
        assert_eq!(
            s.wait_after(9, 0.0, None),
            Some(Duration::from_secs(86_400))
        );
        assert_eq!(s.wait_after(10, 0.0, None), None, "exhausted after ten");
        assert_eq!(s.wait_after(0, 0.0, None), None);
        assert_eq!(s.wait_after(1, 1.0, None), Some(Duration::from_secs(6)));
        assert_eq!(s.wait_after(1, -1.0, None), Some(Duration::from_secs(4)));
        assert_eq!(s.wait_after(1, 7.0, None), Some(Duration::from_secs(6)));
        // Retry-After: clamped between the scheduled wait and twice it.
        assert_eq!(
            s.wait_after(2, 0.5, Some(Duration::from_secs(1))),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            s.wait_after(2, 0.5, Some(Duration::from_secs(420))),
            Some(Duration::from_secs(420))
        );
        assert_eq!(
            s.wait_after(2, 0.5, Some(Duration::from_secs(100_000))),
            Some(Duration::from_secs(600))
        );
        let fast = RetrySchedule::parse("100ms, 1s,2m,1d").unwrap();
        assert_eq!(fast.attempts(), 5);
        assert_eq!(
            fast.wait_after(1, 0.0, None),
            Some(Duration::from_millis(100))
        );
        for bad in ["", "5", "5x", "s5", "5s,,1m", "99999999999h"] {
            assert!(RetrySchedule::parse(bad).is_err(), "{bad:?}");
        }
    }

    fn endpoint() -> Endpoint {
        Endpoint {
            id: EndpointId::generate(),
            url: "https://hooks.example.com/in".into(),
            description: String::new(),
            enabled_events: vec![TypePattern::parse("*").unwrap()],
            ordering: Ordering::None,
            disabled: None,
            owner: Some(UserId::generate()),
            created_at: Timestamp::from_millis(1_000),
            updated_at: Timestamp::from_millis(1_000),
        }
    }

    #[test]
    fn a_patch_that_changes_nothing_is_none_and_enabling_takes_ownership() {
        let e = endpoint();
        let at = Timestamp::from_millis(2_000);
        let me = UserId::generate();
        assert_eq!(patched(&e, &EndpointPatch::default(), Some(&me), at), None);
        let same = EndpointPatch {
            url: Some(e.url.clone()),
            enabled: Some(true),
            ..Default::default()
        };
        assert_eq!(
            patched(&e, &same, Some(&me), at),
            None,
            "enabled stays, owner stays"
        );
        let off = patched(
            &e,
            &EndpointPatch {
                enabled: Some(false),
                ..Default::default()
            },
            Some(&me),
            at,
        )
        .unwrap();
        assert_eq!(off.disabled, Some(DisabledReason::Manual));
        assert_eq!(off.owner, e.owner, "disabling changes no owner");
        assert_eq!(off.updated_at, at);
        assert!(!off.receives(EventType::UserCreated));
        let on = patched(
            &off,
            &EndpointPatch {
                enabled: Some(true),
                ..Default::default()
            },
            Some(&me),
            at,
        )
        .unwrap();
        assert_eq!((on.disabled, on.owner.as_ref()), (None, Some(&me)));
        assert!(on.receives(EventType::UserCreated));
        // The service disables once, and keeps the first reason.
        let gone = disabled_for(&e, DisabledReason::Gone, at).unwrap();
        assert_eq!(gone.status(), "disabled");
        assert_eq!(disabled_for(&gone, DisabledReason::OwnerRemoved, at), None);
    }

    #[test]
    fn d55_owners_are_removed_by_deletion_deactivation_and_demotion() {
        use crate::values::{Email, Name};
        let admin = User {
            id: UserId::generate(),
            email: Email::parse("a@example.com").unwrap(),
            name: Name::parse("A").unwrap(),
            role: Role::Admin,
            status: UserStatus::Active,
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
            has_password: true,
        };
        assert!(owner_removed(&admin, None), "deleted");
        let inactive = User {
            status: UserStatus::Inactive,
            ..admin.clone()
        };
        assert!(owner_removed(&admin, Some(&inactive)), "deactivated");
        let editor = User {
            role: Role::Editor,
            ..admin.clone()
        };
        assert!(owner_removed(&admin, Some(&editor)), "demoted");
        let renamed = User {
            name: Name::parse("B").unwrap(),
            ..admin.clone()
        };
        assert!(
            !owner_removed(&admin, Some(&renamed)),
            "a rename keeps them"
        );
        assert!(
            !owner_removed(&editor, Some(&admin)),
            "a promotion removes nothing"
        );
    }

    #[test]
    fn d55_what_follows_an_attempt() {
        let schedule = RetrySchedule::parse("1s,2s").unwrap();
        let now = Timestamp::from_millis(1_000_000);
        assert_eq!(
            next_step(&schedule, 1, Some(204), None, 0.0, now),
            Next::Done
        );
        assert_eq!(
            next_step(&schedule, 1, Some(410), None, 0.0, now),
            Next::Gone
        );
        assert_eq!(
            next_step(&schedule, 1, Some(500), None, 0.0, now),
            Next::RetryAt(now.plus_millis(1_000))
        );
        assert_eq!(
            next_step(&schedule, 2, None, None, 0.0, now),
            Next::RetryAt(now.plus_millis(2_000)),
            "no answer at all is retried"
        );
        assert_eq!(
            next_step(&schedule, 3, Some(500), None, 0.0, now),
            Next::Exhausted
        );
        // Retry-After counts on 429 and 503 only, clamped to [wait, 2 × wait].
        let long = Some(Duration::from_secs(60));
        assert_eq!(
            next_step(&schedule, 1, Some(429), long, 0.0, now),
            Next::RetryAt(now.plus_millis(2_000))
        );
        assert_eq!(
            next_step(&schedule, 1, Some(500), long, 0.0, now),
            Next::RetryAt(now.plus_millis(1_000))
        );
        let mut a = Attempt {
            id: AttemptId::generate(),
            endpoint: EndpointId::generate(),
            event: EventId::generate(),
            attempt: 1,
            trigger: Trigger::Scheduled,
            started_at: None,
            duration_ms: None,
            response_status: None,
            error: None,
            response_excerpt: None,
            next_attempt_at: Some(now),
        };
        assert_eq!(a.status(), "pending");
        a.started_at = Some(now);
        a.response_status = Some(200);
        assert_eq!(a.status(), "succeeded");
        a.response_status = Some(302);
        a.error = Some(AttemptError::Redirect);
        assert_eq!(a.status(), "failed");
        assert_eq!(Trigger::parse("replay"), Some(Trigger::Replay));
    }

    #[test]
    fn d55_failing_endpoints_are_mailed_once_a_day_and_disabled_after_the_limit() {
        let t = Timestamp::from_millis(1_000_000_000);
        assert!(failing_mail_due(None, t));
        assert!(!failing_mail_due(Some(t), t.plus_seconds(86_399)));
        assert!(failing_mail_due(Some(t), t.plus_seconds(86_400)));
        let five_days = Duration::from_secs(5 * 86_400);
        assert!(!failing_too_long(
            t,
            five_days,
            t.plus_seconds(5 * 86_400 - 1)
        ));
        assert!(failing_too_long(t, five_days, t.plus_seconds(5 * 86_400)));
    }

    #[test]
    fn d55_after_a_failure_gone_disables_at_once_failing_after_the_limit_else_mail_once_a_day() {
        let e = endpoint();
        let t = Timestamp::from_millis(1_000_000_000);
        let day = Duration::from_secs(86_400);
        let later = t.plus_seconds(3_600);
        // A 410: disabled `gone`, whatever the streak.
        let AfterFailure::Disable(off) = after_failure(&e, Next::Gone, later, None, day, later)
        else {
            panic!("a 410 disables");
        };
        assert_eq!(off.disabled, Some(DisabledReason::Gone));
        assert_eq!(off.updated_at, later);
        // Failing for the whole limit: disabled `failing` (before any mail).
        let at = t.plus_seconds(86_400);
        let AfterFailure::Disable(off) = after_failure(&e, Next::Exhausted, t, None, day, at)
        else {
            panic!("failing too long disables");
        };
        assert_eq!(off.disabled, Some(DisabledReason::Failing));
        // An endpoint already disabled is not disabled again.
        let already = Endpoint {
            disabled: Some(DisabledReason::Manual),
            ..e.clone()
        };
        assert_eq!(
            after_failure(&already, Next::Gone, t, Some(t), day, later),
            AfterFailure::Nothing
        );
        // A spent schedule within the limit: the admins are mailed, at most
        // once a day; a retry still to come tells no one.
        assert_eq!(
            after_failure(&e, Next::Exhausted, t, None, day, later),
            AfterFailure::MailAdmins
        );
        assert_eq!(
            after_failure(&e, Next::Exhausted, t, Some(t), day, later),
            AfterFailure::Nothing
        );
        assert_eq!(
            after_failure(&e, Next::RetryAt(later), t, None, day, later),
            AfterFailure::Nothing
        );
    }

    #[test]
    fn d53_the_mocks_schedule_has_one_attempt() {
        let once = RetrySchedule::single();
        assert_eq!(once.attempts(), 1);
        assert_eq!(
            next_step(&once, 1, Some(500), None, 0.0, Timestamp::from_millis(0)),
            Next::Exhausted
        );
    }

    #[test]
    fn statuses_and_errors() {
        assert_eq!(outcome_of(200), Outcome::Succeeded);
        assert_eq!(outcome_of(204), Outcome::Succeeded);
        assert_eq!(outcome_of(299), Outcome::Succeeded);
        assert_eq!(outcome_of(301), Outcome::Failed);
        assert_eq!(AttemptError::of_status(302), Some(AttemptError::Redirect));
        assert_eq!(AttemptError::of_status(500), None);
        assert_eq!(outcome_of(410), Outcome::Gone);
        assert_eq!(outcome_of(404), Outcome::Failed);
        assert_eq!(outcome_of(500), Outcome::Failed);
        assert!(honours_retry_after(429) && honours_retry_after(503));
        assert!(!honours_retry_after(500));
        for e in [
            "timeout",
            "connect",
            "tls",
            "dns",
            "blocked_address",
            "redirect",
            "cancelled",
        ] {
            assert_eq!(AttemptError::parse(e).unwrap().as_str(), e);
        }
        assert_eq!(Ordering::parse("per_object"), Some(Ordering::PerObject));
        assert_eq!(Ordering::parse("fifo"), None);
        assert_eq!(
            DisabledReason::parse("owner_removed").unwrap().as_str(),
            "owner_removed"
        );
    }
}
