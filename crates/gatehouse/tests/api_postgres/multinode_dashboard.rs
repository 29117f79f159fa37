//! The dashboard's sign-in on two nodes of one PostgreSQL database (D48
//! continued, D44): its choice of organization and its code are spent by
//! their first use on either node, so the same answer replayed on the other
//! node (the same browser's cookies and all) signs nobody in.

use gatehouse_domain::{Plan, Role};
use reqwest::StatusCode;

use crate::common::browser::Browser;
use crate::dashboard::{PASSWORD, PICK_COOKIE, local, person, through_callback, to_login};
use crate::multinode_logout::two_nodes;

#[tokio::test]
async fn a_dashboard_code_used_on_node_a_is_refused_on_node_b() {
    let (a, b) = two_nodes().await;
    person(&a, &a.org(), "nodes@example.com", Role::Editor).await;
    let mut on_a = Browser::new(&a);
    let login = to_login(&mut on_a).await;
    let form = login.form_with("password").unwrap();
    let back = on_a
        .submit(
            &form,
            &[("email", "nodes@example.com"), ("password", PASSWORD)],
        )
        .await;
    let callback = local(&back.location().unwrap());
    let mut on_b = Browser::new(&b);
    on_b.jar = on_a.jar.clone();
    through_callback(&mut on_a, &back).await;
    let replay = on_b.get(&callback).await;
    assert_eq!(replay.status, StatusCode::BAD_REQUEST, "{}", replay.body);
    assert!(
        on_b.jar.get("__Host-gh_dash").is_none_or(|v| v.is_empty()),
        "no second session"
    );
}

#[tokio::test]
async fn a_choice_of_organization_made_on_node_a_is_refused_on_node_b() {
    let (a, b) = two_nodes().await;
    let other = a.new_org(Plan::Pro).await;
    person(&a, &a.org(), "both@example.com", Role::Admin).await;
    person(&a, &other, "both@example.com", Role::Viewer).await;
    let mut on_a = Browser::new(&a);
    let login = to_login(&mut on_a).await;
    let form = login.form_with("password").unwrap();
    let pick = on_a
        .submit(
            &form,
            &[("email", "both@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(pick.status, StatusCode::OK, "{}", pick.body);
    let choice = pick.form_with("org").expect("the choice form");
    let mut on_b = Browser::new(&b);
    on_b.jar = on_a.jar.clone();
    assert!(on_b.jar.contains_key(PICK_COOKIE));
    let chosen = on_a.submit(&choice, &[("org", other.as_str())]).await;
    assert_eq!(chosen.status, StatusCode::SEE_OTHER, "{}", chosen.body);
    let replay = on_b.submit(&choice, &[("org", a.org().as_str())]).await;
    assert_eq!(replay.status, StatusCode::UNAUTHORIZED, "{}", replay.body);
    assert!(replay.body.contains("Sign in again"), "{}", replay.body);
}
