//! The Products page (issue 32): the catalog with search, a status filter
//! and paging (D14), adding a product, changing its name, SKU, price and
//! stock, discontinuing it or returning it to sale (D18), and deleting it.
//! Everything goes through `/v1/products` with the person's token (D48).
//!
//! Organizations have no currency: a price is an integer of minor units,
//! shown and typed with two decimals and no symbol (`1999` is `19.99`,
//! `gatehouse_domain::values::price_text`). The page turns what is typed
//! into the API's integers; what it cannot read is refused beside its
//! field, before any request.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use gatehouse_domain::values::{STOCK_RULE, price_text};
use gatehouse_domain::{Name, ProductStatus, Scope, Sku};
use minijinja::{Value, context};
use serde_json::{Value as Json, json};

use super::fields::{created_page, form_errors, notice, page_status, query_value, safe_id};
use super::listing::{self, Filter, Kind, ListPage, ListQuery};
use super::{Peer, not_found};
use crate::http::form::Form;
use crate::state::AppState;
use crate::web::dashboard::api::Reply;
use crate::web::dashboard::{Signed, read_form, render, signed};

/// Products on a page when the link names no `limit`.
const PAGE_SIZE: u32 = 50;

const FILTERS: [Filter; 2] = [
    Filter {
        name: "q",
        label: "Search",
        hint: "name or SKU",
        kind: Kind::Search,
        more: false,
    },
    Filter {
        name: "status",
        label: "Status",
        hint: "",
        kind: Kind::Choice(&[
            ("", "Any"),
            ("available", "available"),
            ("out_of_stock", "out of stock"),
            ("discontinued", "discontinued"),
        ]),
        more: false,
    },
];

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/products", get(catalog).post(create))
        .route("/dashboard/products/{id}", get(product).post(change))
        .route(
            "/dashboard/products/{id}/delete",
            get(confirm_delete).post(delete),
        )
}

fn filter_words(field: &str, _value: &str) -> Option<String> {
    Some(
        match field {
            "q" => "Use at most 200 characters.",
            "status" => "Choose available, out of stock or discontinued.",
            _ => return None,
        }
        .to_owned(),
    )
}

/// The rule of a field of the product forms, in words.
fn field_rule(field: &str) -> Option<&'static str> {
    Some(match field {
        "name" => Name::RULE,
        "sku" => Sku::RULE,
        "price" => price_text::RULE,
        "stock" => STOCK_RULE,
        _ => return None,
    })
}

fn product_notice(uri: &Uri) -> Option<&'static str> {
    match query_value(uri, "done").as_deref() {
        Some("discontinued") => Some("The product is discontinued."),
        Some("returned") => Some("The product is on sale again; its stock sets its status."),
        Some("removed") => Some("The product was deleted."),
        _ => notice(uri),
    }
}

fn product_view(p: &Json) -> Value {
    let price = p["price"].as_i64().unwrap_or(0);
    context! {
        id => p["id"].as_str().unwrap_or(""),
        name => p["name"].as_str().unwrap_or(""),
        sku => p["sku"].as_str().unwrap_or(""),
        price => price_text::format(price),
        stock => p["stock"].as_i64().unwrap_or(0),
        status => p["status"].as_str().unwrap_or(""),
        created_at => p["created_at"].as_str().unwrap_or(""),
    }
}

/// What a product form sends: the API's body, or the fields the page could
/// not read (before any request).
fn product_body(form: &Form) -> Result<Json, Reply> {
    let mut body = serde_json::Map::new();
    let mut refused = Vec::new();
    for name in ["name", "sku"] {
        if let Some(v) = form.value(name) {
            body.insert(name.into(), json!(v.trim()));
        }
    }
    if let Some(v) = form.value("price") {
        match price_text::parse(v) {
            Ok(minor) => {
                body.insert("price".into(), json!(minor));
            }
            Err(_) => refused.push(json!({"field": "price", "issue": "unreadable"})),
        }
    }
    if let Some(v) = form.value("stock") {
        match v.trim().parse::<i64>() {
            Ok(n) => {
                body.insert("stock".into(), json!(n));
            }
            Err(_) => refused.push(json!({"field": "stock", "issue": "unreadable"})),
        }
    }
    if refused.is_empty() {
        Ok(Json::Object(body))
    } else {
        Err(Reply {
            status: StatusCode::BAD_REQUEST,
            body: json!({"error": {"code": "VALIDATION_ERROR",
                "message": "Some fields could not be read.", "details": refused}}),
        })
    }
}

/// The form as typed, to show again with its errors.
fn typed(form: &Form) -> Value {
    context! {
        name => form.value("name"), sku => form.value("sku"),
        price => form.value("price"), stock => form.value("stock"),
    }
}

/// The field errors of a refusal: a taken SKU (409) is the SKU's.
fn errors_of(
    reply: &Reply,
) -> (
    BTreeMap<String, &'static str>,
    crate::web::dashboard::api::Problem,
) {
    let (mut errors, problem) = form_errors(reply, field_rule);
    if reply.status == StatusCode::CONFLICT {
        errors.insert("sku".to_owned(), "Another product already has this SKU.");
    }
    (errors, problem)
}

// ---- The catalog ----------------------------------------------------------

async fn catalog(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    list_page(
        &st,
        &headers,
        &signed,
        &ListQuery::of(&uri),
        product_notice(&uri),
        None,
    )
    .await
}

async fn list_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    q: &ListQuery,
    notice: Option<&str>,
    refused: Option<(Value, Reply)>,
) -> Response {
    let l = listing::list(
        st,
        signed,
        q,
        &ListPage {
            api: "/products",
            page: "/dashboard/products",
            filters: &FILTERS,
            page_size: PAGE_SIZE,
            value: listing::as_typed,
            words: filter_words,
            view: product_view,
        },
    )
    .await;
    let (status, problem, errors, form) = match refused {
        Some((form, r)) => {
            let (errors, problem) = errors_of(&r);
            (page_status(&r), Some(problem), errors, form)
        }
        None => (
            page_status(&l.reply),
            None,
            BTreeMap::new(),
            context! { stock => "0" },
        ),
    };
    render(
        st,
        headers,
        signed,
        status,
        "dash_products.html",
        "products",
        context! {
            problem, notice, form, errors,
            products => l.items, list_problem => l.problem, paging => l.paging,
            past_end => l.past_end, filters => l.filters, filtered => l.filtered,
            listed => l.reply.ok(),
            can_write => signed.can(Scope::ProductsWrite),
            rules => rules(),
        },
    )
    .await
}

fn rules() -> Value {
    context! {
        name => Name::RULE, sku => Sku::RULE, price => price_text::RULE, stock => STOCK_RULE,
    }
}

async fn create(State(st): State<AppState>, ConnectInfo(peer): Peer, req: Request) -> Response {
    let (headers, form) = form_or_return!(st, req);
    let signed = signed_or_return!(st, headers, peer);
    let reply = match product_body(&form) {
        Ok(body) => {
            signed
                .api(&st, Method::POST, "/products", Some(&body))
                .await
        }
        Err(refusal) => refusal,
    };
    if reply.ok() {
        return signed.redirect(&st, &created_page("/dashboard/products", &reply, "created"));
    }
    list_page(
        &st,
        &headers,
        &signed,
        &ListQuery::from_pairs(Vec::new()),
        None,
        Some((typed(&form), reply)),
    )
    .await
}

// ---- A product ------------------------------------------------------------

async fn product(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let Some(id) = safe_id(&id) else {
        return not_found(&st);
    };
    product_page(&st, &headers, &signed, id, product_notice(&uri), None).await
}

async fn product_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    id: &str,
    notice: Option<&str>,
    refused: Option<(Value, Reply)>,
) -> Response {
    let reply = signed
        .api(st, Method::GET, &format!("/products/{id}"), None)
        .await;
    if reply.status == StatusCode::NOT_FOUND {
        return not_found(st);
    }
    let product = reply.ok().then(|| product_view(reply.data()));
    let (status, problem, errors, form) = match refused {
        Some((form, r)) => {
            let (errors, problem) = errors_of(&r);
            // A refused status change leaves the details form as stored.
            let typed = (!form.is_undefined()).then_some(form);
            (page_status(&r), Some(problem), errors, typed)
        }
        None => (
            page_status(&reply),
            (!reply.ok()).then(|| reply.problem()),
            BTreeMap::new(),
            None,
        ),
    };
    render(
        st,
        headers,
        signed,
        status,
        "dash_product.html",
        "products",
        context! {
            form => form.or_else(|| product.clone()),
            product, problem, notice, errors,
            can_write => signed.can(Scope::ProductsWrite),
            rules => rules(),
        },
    )
    .await
}

/// Saves the product form, or changes the status alone: `discontinue`, or
/// `return` to sale (the status D18 gives the stock).
async fn change(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, form, signed, id) = posted_or_return!(st, req, peer, id);
    let (body, done) = match form.get("action") {
        Some("discontinue") => (
            Ok(json!({ "status": ProductStatus::Discontinued.as_str() })),
            "discontinued",
        ),
        Some("return") => {
            // The stock as it is now, not as the page showed it (D18).
            let now = signed
                .api(&st, Method::GET, &format!("/products/{id}"), None)
                .await;
            let stock = now.data()["stock"].as_i64().unwrap_or(0);
            (
                Ok(json!({ "status": ProductStatus::for_stock(stock).as_str() })),
                "returned",
            )
        }
        _ => (product_body(&form), "updated"),
    };
    let reply = match body {
        Ok(body) => {
            signed
                .api(&st, Method::PATCH, &format!("/products/{id}"), Some(&body))
                .await
        }
        Err(refusal) => refusal,
    };
    if reply.ok() {
        return signed.redirect(&st, &format!("/dashboard/products/{id}?done={done}"));
    }
    // A refused status change shows the page with the API's words; a
    // refused form shows what was typed, each problem beside its field.
    let shown = if form.get("action").is_some() {
        Value::UNDEFINED
    } else {
        typed(&form)
    };
    product_page(&st, &headers, &signed, id, None, Some((shown, reply))).await
}

async fn confirm_delete(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let signed = signed_or_return!(st, headers, peer);
    let Some(id) = safe_id(&id) else {
        return not_found(&st);
    };
    delete_page(&st, &headers, &signed, id, None).await
}

async fn delete_page(
    st: &AppState,
    headers: &HeaderMap,
    signed: &Signed,
    id: &str,
    failed: Option<Reply>,
) -> Response {
    let reply = signed
        .api(st, Method::GET, &format!("/products/{id}"), None)
        .await;
    if reply.status == StatusCode::NOT_FOUND {
        return not_found(st);
    }
    let product = reply.ok().then(|| product_view(reply.data()));
    let shown = failed.as_ref().unwrap_or(&reply);
    render(
        st,
        headers,
        signed,
        page_status(shown),
        "dash_product_delete.html",
        "products",
        context! { product, problem => (!shown.ok()).then(|| shown.problem()) },
    )
    .await
}

async fn delete(
    State(st): State<AppState>,
    ConnectInfo(peer): Peer,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let (headers, _form, signed, id) = posted_or_return!(st, req, peer, id);
    let reply = signed
        .api(&st, Method::DELETE, &format!("/products/{id}"), None)
        .await;
    if reply.ok() {
        return signed.redirect(&st, "/dashboard/products?done=removed");
    }
    delete_page(&st, &headers, &signed, id, Some(reply)).await
}
