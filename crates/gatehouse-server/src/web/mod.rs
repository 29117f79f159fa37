//! What people see in a browser: the sign-in, consent and password pages
//! (`/oauth/authorize`, `/oauth/logout`, the invitation and reset links),
//! the developer dashboard (D48), and the reference documentation under
//! `/docs` (D35, D52) — all from auto-escaping templates compiled into the
//! binary ([`templates`]).

pub mod authorize;
pub mod dashboard;
pub mod docs;
pub mod links;
pub mod logout;
pub mod pages;
pub mod passkeys;
pub mod qr;
pub mod reference;
pub mod second_step;
pub mod templates;
