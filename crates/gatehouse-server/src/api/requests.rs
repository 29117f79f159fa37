//! The JSON request bodies of the API, one type each, and their conversion
//! into domain values.
//!
//! Each field is an [`Input`]: it accepts any JSON value and records a wrong
//! type instead of failing deserialization. [`read`] takes the fields a type
//! does not name out of the body first (serde's own list of the type's
//! fields), so the conversion reports every problem of the body at once
//! (D6): unknown fields first (D12), then the named fields in order. The
//! same types describe the bodies in the OpenAPI document (`ToSchema`;
//! `deny_unknown_fields` makes it say `additionalProperties: false`).

use gatehouse_domain::user::UserPatch;
use gatehouse_domain::values::parse_amount;
use gatehouse_domain::{
    Email, FieldIssue, Name, ProductPatch, ProductStatus, Role, Sku, UserStatus,
};
use serde::de::{self, DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::http::schemas;

/// A JSON body type and the domain value it converts into.
pub trait RequestBody: DeserializeOwned + Send {
    type Domain: Send;
    /// The domain value, or every problem of the body: those already
    /// found (unknown fields) and this type's own.
    fn into_domain(self, issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>>;
}

/// Reads a JSON object into `B` and on into its domain value.
pub fn read<B: RequestBody>(mut map: Map<String, Value>) -> Result<B::Domain, Vec<FieldIssue>> {
    let known = field_names::<B>();
    let unknown: Vec<String> = map
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in &unknown {
        map.remove(k);
    }
    // Every field reads any JSON value and the unknown ones are gone, so
    // this fails only on a bug in a request type.
    let body = B::deserialize(Value::Object(map))
        .map_err(|e| vec![FieldIssue::new("body", format!("cannot be read: {e}"))])?;
    body.into_domain(Issues::unknown(unknown))
}

/// The field names serde's derived `Deserialize` of `T` expects: what it
/// passes to `deserialize_struct`.
fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Names<'n>(&'n mut &'static [&'static str]);

    impl<'de> Deserializer<'de> for Names<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("field names read"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(Names(&mut names));
    names
}

/// One body field as sent: absent, of the wrong JSON type (the issue), or a
/// value of the expected type still to be checked. `null` is a wrong type,
/// so a PATCH tells an absent field (no change) from `null` (refused).
#[derive(Debug, Default)]
pub enum Input<T> {
    #[default]
    Absent,
    Wrong(&'static str),
    Given(T),
}

/// A JSON type a body field may have.
pub trait JsonType: Sized {
    fn from_json(v: Value) -> Result<Self, &'static str>;
}

impl JsonType for String {
    fn from_json(v: Value) -> Result<Self, &'static str> {
        match v {
            Value::String(s) => Ok(s),
            _ => Err("must be a string"),
        }
    }
}

impl JsonType for i64 {
    fn from_json(v: Value) -> Result<Self, &'static str> {
        match v.as_i64() {
            Some(n) => Ok(n),
            None if v.is_u64() => Err("must be an integer from 0 to 9007199254740991"),
            None => Err("must be an integer"),
        }
    }
}

impl<'de, T: JsonType> Deserialize<'de> for Input<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match T::from_json(Value::deserialize(d)?) {
            Ok(v) => Input::Given(v),
            Err(issue) => Input::Wrong(issue),
        })
    }
}

/// The problems of one body, in the order they are reported.
pub struct Issues(Vec<FieldIssue>);

impl Issues {
    /// Starts with the unknown fields (D12).
    pub fn unknown(fields: Vec<String>) -> Self {
        Self(
            fields
                .into_iter()
                .map(|k| FieldIssue::new(k, "is not a known field"))
                .collect(),
        )
    }

    pub fn check<T, U>(
        &mut self,
        name: &str,
        input: Input<T>,
        required: bool,
        parse: impl FnOnce(T) -> Result<U, String>,
    ) -> Option<U> {
        let issue = match input {
            Input::Absent if required => "is required".to_owned(),
            Input::Absent => return None,
            Input::Wrong(issue) => issue.to_owned(),
            Input::Given(v) => match parse(v) {
                Ok(u) => return Some(u),
                Err(issue) => issue,
            },
        };
        self.0.push(FieldIssue::new(name, issue));
        None
    }

    pub fn required_text<U>(
        &mut self,
        name: &str,
        input: Input<String>,
        parse: impl FnOnce(&str) -> Result<U, String>,
    ) -> Option<U> {
        self.check(name, input, true, |s| parse(&s))
    }

    pub fn optional_text<U>(
        &mut self,
        name: &str,
        input: Input<String>,
        parse: impl FnOnce(&str) -> Result<U, String>,
    ) -> Option<U> {
        self.check(name, input, false, |s| parse(&s))
    }

    pub fn required_int<U>(
        &mut self,
        name: &str,
        input: Input<i64>,
        parse: impl FnOnce(i64) -> Result<U, String>,
    ) -> Option<U> {
        self.check(name, input, true, parse)
    }

    pub fn optional_int<U>(
        &mut self,
        name: &str,
        input: Input<i64>,
        parse: impl FnOnce(i64) -> Result<U, String>,
    ) -> Option<U> {
        self.check(name, input, false, parse)
    }

    /// `value` when no problem was found.
    pub fn finish<T>(self, value: T) -> Result<T, Vec<FieldIssue>> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(self.0)
        }
    }

    /// The problems found; only called once one is known (a required
    /// field's `None` always recorded its issue).
    pub fn into_vec(self) -> Vec<FieldIssue> {
        self.0
    }
}

// interface.md §4.3, D11, D12.
/// A user to invite: created `pending_invite`, an invitation e-mail is sent.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewUser)]
pub struct CreateUserRequest {
    #[serde(default)]
    #[schema(value_type = String, format = "email", max_length = 254, required = true)]
    pub email: Input<String>,
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200, required = true)]
    pub name: Input<String>,
    #[serde(default)]
    #[schema(schema_with = schemas::role, required = true)]
    pub role: Input<String>,
}

/// The user an administrator invites.
pub struct Invitation {
    pub email: Email,
    pub name: Name,
    pub role: Role,
}

impl RequestBody for CreateUserRequest {
    type Domain = Invitation;
    fn into_domain(self, mut issues: Issues) -> Result<Invitation, Vec<FieldIssue>> {
        let email = issues.required_text("email", self.email, Email::parse);
        let name = issues.required_text("name", self.name, Name::parse);
        let role = issues.required_text("role", self.role, Role::parse);
        match (email, name, role) {
            (Some(email), Some(name), Some(role)) => {
                issues.finish(Invitation { email, name, role })
            }
            _ => Err(issues.into_vec()),
        }
    }
}

// D9 (all or nothing), D11 (status transitions).
/// Changes to a user; absent fields stay as they are.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UserPatch)]
pub struct UpdateUserRequest {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200)]
    pub name: Input<String>,
    #[serde(default)]
    #[schema(schema_with = schemas::role)]
    pub role: Input<String>,
    #[serde(default)]
    #[schema(schema_with = schemas::patch_user_status)]
    pub status: Input<String>,
}

impl RequestBody for UpdateUserRequest {
    type Domain = UserPatch;
    fn into_domain(self, mut issues: Issues) -> Result<UserPatch, Vec<FieldIssue>> {
        let patch = UserPatch {
            name: issues.optional_text("name", self.name, Name::parse),
            role: issues.optional_text("role", self.role, Role::parse),
            status: issues.optional_text("status", self.status, UserStatus::parse_patch),
        };
        issues.finish(patch)
    }
}

// interface.md §4.4, D16.
/// A new product; its status follows the stock unless `discontinued`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewProduct)]
pub struct CreateProductRequest {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200, required = true)]
    pub name: Input<String>,
    #[serde(default)]
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._-]{1,64}$", required = true)]
    pub sku: Input<String>,
    #[serde(default)]
    #[schema(value_type = i64, minimum = 0, maximum = 9007199254740991_i64, required = true)]
    pub price: Input<i64>,
    #[serde(default)]
    #[schema(value_type = i64, minimum = 0, maximum = 9007199254740991_i64, required = true)]
    pub stock: Input<i64>,
    #[serde(default)]
    #[schema(schema_with = schemas::creation_status)]
    pub status: Input<String>,
}

/// D16: only `discontinued` may be chosen at creation; otherwise stock decides (D18).
fn creation_status(s: &str) -> Result<bool, String> {
    match s {
        "discontinued" => Ok(true),
        _ => Err(
            "may only be discontinued at creation; otherwise the status follows the stock".into(),
        ),
    }
}

impl RequestBody for CreateProductRequest {
    type Domain = gatehouse_domain::NewProduct;
    fn into_domain(self, mut issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>> {
        let name = issues.required_text("name", self.name, Name::parse);
        let sku = issues.required_text("sku", self.sku, Sku::parse);
        let price = issues.required_int("price", self.price, parse_amount);
        let stock = issues.required_int("stock", self.stock, parse_amount);
        let discontinued = issues
            .optional_text("status", self.status, creation_status)
            .unwrap_or(false);
        match (name, sku, price, stock) {
            (Some(name), Some(sku), Some(price), Some(stock)) => {
                issues.finish(gatehouse_domain::NewProduct {
                    name,
                    sku,
                    price,
                    stock,
                    discontinued,
                })
            }
            _ => Err(issues.into_vec()),
        }
    }
}

/// Changes to a product; absent fields stay as they are.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ProductPatch)]
pub struct UpdateProductRequest {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200)]
    pub name: Input<String>,
    #[serde(default)]
    #[schema(value_type = String, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub sku: Input<String>,
    #[serde(default)]
    #[schema(value_type = i64, minimum = 0, maximum = 9007199254740991_i64)]
    pub price: Input<i64>,
    #[serde(default)]
    #[schema(value_type = i64, minimum = 0, maximum = 9007199254740991_i64)]
    pub stock: Input<i64>,
    #[serde(default)]
    #[schema(schema_with = schemas::product_status)]
    pub status: Input<String>,
}

impl RequestBody for UpdateProductRequest {
    type Domain = ProductPatch;
    fn into_domain(self, mut issues: Issues) -> Result<ProductPatch, Vec<FieldIssue>> {
        let patch = ProductPatch {
            name: issues.optional_text("name", self.name, Name::parse),
            sku: issues.optional_text("sku", self.sku, Sku::parse),
            price: issues.optional_int("price", self.price, parse_amount),
            stock: issues.optional_int("stock", self.stock, parse_amount),
            status: issues.optional_text("status", self.status, ProductStatus::parse),
        };
        issues.finish(patch)
    }
}

// D15.
/// Changes to your own profile: only the name.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ProfilePatch)]
pub struct UpdateProfileRequest {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200)]
    pub name: Input<String>,
}

impl RequestBody for UpdateProfileRequest {
    type Domain = Option<Name>;
    fn into_domain(self, mut issues: Issues) -> Result<Option<Name>, Vec<FieldIssue>> {
        let name = issues.optional_text("name", self.name, Name::parse);
        issues.finish(name)
    }
}

// D55.
/// A webhook endpoint to register; its signing secret is in the answer once.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewWebhookEndpoint)]
pub struct CreateWebhookEndpointRequest {
    /// `https` (plain `http` only to a range the operator allowed), at most
    /// 2,048 characters, no user-info; its addresses must not be loopback,
    /// private, link-local, shared, multicast, reserved or unspecified.
    #[serde(default)]
    #[schema(value_type = String, max_length = 2048, required = true)]
    pub url: Input<String>,
    #[serde(default)]
    #[schema(value_type = String, max_length = 500)]
    pub description: Input<String>,
    /// Default `["*"]`.
    #[serde(default)]
    #[schema(schema_with = schemas::event_patterns)]
    pub enabled_events: Input<Vec<String>>,
    /// `none` (default) or `per_object`: at most one undelivered event per
    /// object at a time.
    #[serde(default)]
    #[schema(schema_with = schemas::endpoint_ordering)]
    pub ordering: Input<String>,
}

/// D55's `url` input rules that need no configuration (the allow-list and
/// the address rules are the application's).
fn endpoint_url(s: &str) -> Result<String, String> {
    gatehouse_domain::webhook::EndpointUrl::check_syntax(s)
        .map(|()| s.to_owned())
        .map_err(str::to_owned)
}

fn endpoint_ordering(s: &str) -> Result<gatehouse_domain::webhook::Ordering, String> {
    gatehouse_domain::webhook::Ordering::parse(s)
        .ok_or_else(|| "must be \"none\" or \"per_object\"".to_owned())
}

impl RequestBody for CreateWebhookEndpointRequest {
    type Domain = gatehouse_app::webhooks::NewEndpoint;
    fn into_domain(self, mut issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>> {
        use gatehouse_domain::webhook;
        let url = issues.required_text("url", self.url, endpoint_url);
        let description =
            issues.optional_text("description", self.description, webhook::parse_description);
        let enabled_events = issues.check("enabled_events", self.enabled_events, false, |p| {
            webhook::parse_enabled_events(&p)
        });
        let ordering = issues.optional_text("ordering", self.ordering, endpoint_ordering);
        match url {
            Some(url) => issues.finish(gatehouse_app::webhooks::NewEndpoint {
                url,
                description: description.unwrap_or_default(),
                enabled_events: enabled_events.unwrap_or_else(gatehouse_app::webhooks::every_event),
                ordering: ordering.unwrap_or_default(),
            }),
            None => Err(issues.into_vec()),
        }
    }
}

// D55.
/// Changes to a webhook endpoint; absent fields stay.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = WebhookEndpointPatch)]
pub struct UpdateWebhookEndpointRequest {
    #[serde(default)]
    #[schema(value_type = String, max_length = 2048)]
    pub url: Input<String>,
    #[serde(default)]
    #[schema(value_type = String, max_length = 500)]
    pub description: Input<String>,
    #[serde(default)]
    #[schema(schema_with = schemas::event_patterns)]
    pub enabled_events: Input<Vec<String>>,
    #[serde(default)]
    #[schema(schema_with = schemas::endpoint_ordering)]
    pub ordering: Input<String>,
    /// `disabled` stops deliveries (pending ones are cancelled);
    /// `enabled` resumes them and makes you the owner.
    #[serde(default)]
    #[schema(schema_with = schemas::endpoint_status)]
    pub status: Input<String>,
}

impl RequestBody for UpdateWebhookEndpointRequest {
    type Domain = gatehouse_domain::webhook::EndpointPatch;
    fn into_domain(self, mut issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>> {
        use gatehouse_domain::webhook;
        let patch = webhook::EndpointPatch {
            url: issues.optional_text("url", self.url, endpoint_url),
            description: issues.optional_text(
                "description",
                self.description,
                webhook::parse_description,
            ),
            enabled_events: issues.check("enabled_events", self.enabled_events, false, |p| {
                webhook::parse_enabled_events(&p)
            }),
            ordering: issues.optional_text("ordering", self.ordering, endpoint_ordering),
            enabled: issues.optional_text("status", self.status, |s| match s {
                "enabled" => Ok(true),
                "disabled" => Ok(false),
                _ => Err("must be \"enabled\" or \"disabled\"".to_owned()),
            }),
        };
        issues.finish(patch)
    }
}

// D55.
/// A secret rotation; the previous secret keeps signing for the grace.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = WebhookSecretRotation)]
pub struct RotateWebhookSecretRequest {
    /// Seconds the previous secret keeps signing alongside the new one
    /// (default 86,400, at most 604,800).
    #[serde(default)]
    #[schema(value_type = u32, minimum = 0, maximum = 604800)]
    pub grace_seconds: Input<i64>,
}

impl RequestBody for RotateWebhookSecretRequest {
    type Domain = u32;
    fn into_domain(self, mut issues: Issues) -> Result<u32, Vec<FieldIssue>> {
        let grace = issues.optional_int(
            "grace_seconds",
            self.grace_seconds,
            gatehouse_app::webhooks::check_grace,
        );
        issues.finish(grace.unwrap_or(gatehouse_domain::webhook::DEFAULT_GRACE_SECS))
    }
}

// D55.
/// What to replay to an endpoint.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = WebhookReplay)]
pub struct ReplayRequest {
    /// From (RFC 3339), within the event retention.
    #[serde(default)]
    #[schema(value_type = String, format = DateTime, required = true)]
    pub since: Input<String>,
    /// Until, exclusive (RFC 3339; default now).
    #[serde(default)]
    #[schema(value_type = String, format = DateTime)]
    pub until: Input<String>,
    /// Only events whose latest attempt to this endpoint failed, or that
    /// have none (default false).
    #[serde(default)]
    #[schema(value_type = bool)]
    pub only_failed: Input<bool>,
}

/// A parsed replay.
#[derive(Clone, Debug)]
pub struct Replay {
    pub since: gatehouse_domain::Timestamp,
    pub until: Option<gatehouse_domain::Timestamp>,
    pub only_failed: bool,
}

fn rfc3339(s: &str) -> Result<gatehouse_domain::Timestamp, String> {
    gatehouse_domain::Timestamp::parse_rfc3339(s)
        .ok_or_else(|| "must be an RFC 3339 date and time, e.g. 2026-11-23T10:00:00Z".into())
}

impl RequestBody for ReplayRequest {
    type Domain = Replay;
    fn into_domain(self, mut issues: Issues) -> Result<Replay, Vec<FieldIssue>> {
        let since = issues.required_text("since", self.since, rfc3339);
        let until = issues.optional_text("until", self.until, rfc3339);
        let only_failed = issues.check("only_failed", self.only_failed, false, Ok);
        match since {
            Some(since) => issues.finish(Replay {
                since,
                until,
                only_failed: only_failed.unwrap_or(false),
            }),
            None => Err(issues.into_vec()),
        }
    }
}

// D55.
/// The endpoint to redeliver an event to.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Redelivery)]
pub struct RedeliverRequest {
    #[serde(default)]
    #[schema(value_type = String, pattern = "^we_[A-Za-z0-9]+$", required = true)]
    pub endpoint: Input<String>,
}

impl RequestBody for RedeliverRequest {
    type Domain = gatehouse_domain::EndpointId;
    fn into_domain(self, mut issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>> {
        let endpoint = issues.required_text("endpoint", self.endpoint, |s| {
            gatehouse_domain::EndpointId::parse(s)
                .ok_or_else(|| "must be a webhook endpoint id (we_…)".to_owned())
        });
        match endpoint {
            Some(e) => issues.finish(e),
            None => Err(issues.into_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issues<B: RequestBody>(json: &str) -> Vec<(String, String)> {
        let map = serde_json::from_str(json).expect("an object");
        match read::<B>(map) {
            Ok(_) => Vec::new(),
            Err(v) => v.into_iter().map(|i| (i.field, i.issue)).collect(),
        }
    }

    #[test]
    fn every_problem_is_reported_unknown_fields_first() {
        let got = issues::<CreateProductRequest>(
            r#"{"zz": 1, "name": 5, "price": -1, "stock": 1.5, "aa": null}"#,
        );
        let fields: Vec<&str> = got.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["aa", "zz", "name", "sku", "price", "stock"]);
        assert_eq!(got[2].1, "must be a string");
        assert_eq!(got[3].1, "is required");
        assert_eq!(got[5].1, "must be an integer");
    }

    #[test]
    fn a_patch_tells_absent_from_null() {
        assert!(issues::<UpdateUserRequest>("{}").is_empty());
        assert_eq!(
            issues::<UpdateUserRequest>(r#"{"name": null}"#),
            [("name".to_owned(), "must be a string".to_owned())]
        );
    }

    #[test]
    fn an_integer_beyond_i64_names_the_range() {
        assert_eq!(
            issues::<UpdateProductRequest>(r#"{"price": 18446744073709551615}"#),
            [(
                "price".to_owned(),
                "must be an integer from 0 to 9007199254740991".to_owned()
            )]
        );
    }
}

impl JsonType for bool {
    fn from_json(v: Value) -> Result<Self, &'static str> {
        match v {
            Value::Bool(b) => Ok(b),
            _ => Err("must be true or false"),
        }
    }
}

impl JsonType for Vec<String> {
    fn from_json(v: Value) -> Result<Self, &'static str> {
        match v {
            Value::Array(items) => items
                .into_iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s),
                    _ => Err("must be an array of strings"),
                })
                .collect(),
            _ => Err("must be an array of strings"),
        }
    }
}

/// D46: a `scopes` array: known scope names, at least one.
fn scope_list(names: Vec<String>) -> Result<gatehouse_domain::ScopeSet, String> {
    if names.is_empty() {
        return Err("must name at least one scope".into());
    }
    names
        .iter()
        .map(|n| {
            gatehouse_domain::Scope::parse(n)
                .ok_or_else(|| format!("names an unknown scope: {n:?}"))
        })
        .collect()
}

/// The most URIs of one kind an application may register.
const MAX_URIS: usize = 20;

/// D20, D46: an array of redirect URIs, each checked by D20's rules.
fn uri_list(uris: Vec<String>) -> Result<Vec<gatehouse_domain::RedirectUri>, String> {
    if uris.len() > MAX_URIS {
        return Err(format!("must have at most {MAX_URIS} URIs"));
    }
    let mut out: Vec<gatehouse_domain::RedirectUri> = Vec::with_capacity(uris.len());
    for (i, u) in uris.iter().enumerate() {
        let uri = gatehouse_domain::RedirectUri::parse(u).map_err(|e| format!("item {i} {e}"))?;
        if out.iter().any(|o| o.as_str() == uri.as_str()) {
            return Err(format!("item {i} is listed twice"));
        }
        out.push(uri);
    }
    Ok(out)
}

// D46.
/// An application to register. A confidential application gets a secret,
/// shown once in the answer; a public one has none and needs a redirect URI.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewApplication)]
pub struct CreateApplicationRequest {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200, required = true)]
    pub name: Input<String>,
    #[serde(default, rename = "type")]
    #[schema(schema_with = schemas::application_type, required = true)]
    pub kind: Input<String>,
    #[serde(default)]
    #[schema(value_type = Vec<String>, max_items = 20)]
    pub redirect_uris: Input<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Vec<String>, max_items = 20)]
    pub post_logout_redirect_uris: Input<Vec<String>>,
    #[serde(default)]
    #[schema(schema_with = schemas::scope_list, required = true)]
    pub scopes: Input<Vec<String>>,
}

impl RequestBody for CreateApplicationRequest {
    type Domain = gatehouse_app::clients::ClientRegistration;
    fn into_domain(self, mut issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>> {
        let name = issues.required_text("name", self.name, Name::parse);
        let kind = issues.required_text(
            "type",
            self.kind,
            gatehouse_app::manage::ApplicationType::parse,
        );
        let redirect_uris = issues.check("redirect_uris", self.redirect_uris, false, uri_list);
        let logout_uris = issues.check(
            "post_logout_redirect_uris",
            self.post_logout_redirect_uris,
            false,
            uri_list,
        );
        let scopes = issues.check("scopes", self.scopes, true, scope_list);
        match (name, kind, scopes) {
            (Some(name), Some(kind), Some(scopes)) => {
                issues.finish(gatehouse_app::clients::ClientRegistration {
                    name,
                    scopes,
                    redirect_uris: redirect_uris.unwrap_or_default(),
                    post_logout_redirect_uris: logout_uris.unwrap_or_default(),
                    public: kind == gatehouse_app::manage::ApplicationType::Public,
                    owner: None,
                })
            }
            _ => Err(issues.into_vec()),
        }
    }
}

// D46.
/// Changes to an application; absent fields stay as they are. Redirect URIs
/// and scopes need every scope the application is registered for.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ApplicationPatch)]
pub struct UpdateApplicationRequest {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200)]
    pub name: Input<String>,
    #[serde(default)]
    #[schema(value_type = Vec<String>, max_items = 20)]
    pub redirect_uris: Input<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Vec<String>, max_items = 20)]
    pub post_logout_redirect_uris: Input<Vec<String>>,
    #[serde(default)]
    #[schema(schema_with = schemas::scope_list)]
    pub scopes: Input<Vec<String>>,
    /// D46 (revised): move the application to this active user of the
    /// organization (an admin or an organization-wide credential only). A
    /// confidential application moved away from a deactivated or deleted
    /// owner refuses its secret until it is rotated with no grace.
    #[serde(default)]
    #[schema(value_type = String, pattern = "^usr_[A-Za-z0-9]+$")]
    pub owner_id: Input<String>,
}

impl RequestBody for UpdateApplicationRequest {
    type Domain = gatehouse_app::clients::ClientUpdate;
    fn into_domain(self, mut issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>> {
        let update = gatehouse_app::clients::ClientUpdate {
            name: issues.optional_text("name", self.name, Name::parse),
            redirect_uris: issues.check("redirect_uris", self.redirect_uris, false, uri_list),
            post_logout_redirect_uris: issues.check(
                "post_logout_redirect_uris",
                self.post_logout_redirect_uris,
                false,
                uri_list,
            ),
            scopes: issues.check("scopes", self.scopes, false, scope_list),
            owner: issues.optional_text("owner_id", self.owner_id, |s| {
                gatehouse_domain::UserId::parse(s)
                    .ok_or_else(|| "must be a user id (usr_…)".to_owned())
            }),
        };
        issues.finish(update)
    }
}

// D46, D20.
/// How long the previous secret keeps working (default 0: it stops now).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SecretRotation)]
pub struct RotateSecretRequest {
    #[serde(default)]
    #[schema(value_type = u64, minimum = 0, maximum = 604800)]
    pub grace_seconds: Input<i64>,
}

impl RequestBody for RotateSecretRequest {
    type Domain = u64;
    fn into_domain(self, mut issues: Issues) -> Result<u64, Vec<FieldIssue>> {
        let grace = issues.optional_int("grace_seconds", self.grace_seconds, |n| {
            u64::try_from(n)
                .ok()
                .filter(|n| *n <= gatehouse_domain::manage::MAX_SECRET_GRACE_SECS)
                .ok_or_else(|| "must be from 0 to 604800 (7 days)".to_owned())
        });
        issues.finish(grace.unwrap_or(0))
    }
}

// D46.
/// An API key to create; the key is in the answer once.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NewApiKey)]
pub struct CreateApiKeyRequest {
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200, required = true)]
    pub name: Input<String>,
    #[serde(default)]
    #[schema(schema_with = schemas::key_scope_list, required = true)]
    pub scopes: Input<Vec<String>>,
    #[serde(default)]
    #[schema(schema_with = schemas::timestamp)]
    pub expires_at: Input<String>,
}

impl RequestBody for CreateApiKeyRequest {
    type Domain = gatehouse_app::manage::KeyRequest;
    fn into_domain(self, mut issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>> {
        let name = issues.required_text("name", self.name, Name::parse);
        let scopes = issues.check("scopes", self.scopes, true, |names| {
            let set = scope_list(names)?;
            if !set
                .intersect(gatehouse_domain::ScopeSet::identity())
                .is_empty()
            {
                return Err(
                    "cannot include openid, profile or email (they are for signing people in)"
                        .into(),
                );
            }
            Ok(set)
        });
        let expires_at = issues.optional_text("expires_at", self.expires_at, |s| {
            gatehouse_domain::Timestamp::parse_rfc3339(s).ok_or_else(|| {
                "must be an RFC 3339 date and time, e.g. 2027-01-31T00:00:00Z".into()
            })
        });
        match (name, scopes) {
            (Some(name), Some(scopes)) => issues.finish(gatehouse_app::manage::KeyRequest {
                name,
                scopes,
                expires_at,
            }),
            _ => Err(issues.into_vec()),
        }
    }
}

// D56.
/// A change of the organization's second-factor policy.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SecurityPolicyPatch)]
pub struct UpdateSecurityRequest {
    /// `optional`, `required_for_admins` or `required`.
    #[serde(default)]
    #[schema(value_type = String, pattern = "^(optional|required_for_admins|required)$")]
    pub mfa: Input<String>,
    /// Days a person covered by the policy may still skip setting up a
    /// second factor, from their first sign-in under it (0–30).
    #[serde(default)]
    #[schema(value_type = u32, minimum = 0, maximum = 30)]
    pub enrollment_grace_days: Input<i64>,
}

impl RequestBody for UpdateSecurityRequest {
    type Domain = gatehouse_domain::mfa::PolicyPatch;
    fn into_domain(self, mut issues: Issues) -> Result<Self::Domain, Vec<FieldIssue>> {
        use gatehouse_domain::mfa;
        let patch = mfa::PolicyPatch {
            mfa: issues.optional_text("mfa", self.mfa, mfa::MfaMode::parse),
            enrollment_grace_days: issues.optional_int(
                "enrollment_grace_days",
                self.enrollment_grace_days,
                |d| {
                    u32::try_from(d)
                        .ok()
                        .filter(|d| *d <= mfa::GRACE_DAYS_MAX)
                        .ok_or_else(|| {
                            format!("must be an integer from 0 to {}", mfa::GRACE_DAYS_MAX)
                        })
                },
            ),
        };
        issues.finish(patch)
    }
}
