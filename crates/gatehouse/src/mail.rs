//! E-mail delivery from the durable outbox (D30): a background worker claims
//! due messages, sends them by SMTP when `smtp_url` is set, otherwise writes
//! each as an RFC 5322 `.eml` file to `<data_dir>/outbox/` (temporary name,
//! then rename, so a reader never sees half a message), and retries failures
//! with exponential back-off. A mail server that is down loses nothing.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use gatehouse_app::App;
use gatehouse_app::outbox::{Delivery, OutboxMessage};
use gatehouse_domain::Email;
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use tokio::sync::watch;

/// How deliveries go out.
pub enum Transport {
    Files(PathBuf),
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
}

impl Transport {
    pub fn from_settings(
        smtp_url: Option<&str>,
        data_dir: &std::path::Path,
    ) -> anyhow::Result<Self> {
        match smtp_url.filter(|u| !u.trim().is_empty()) {
            Some(url) => Ok(Transport::Smtp(
                AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
                    .context("GATEHOUSE_SMTP_URL is not a valid smtp:// or smtps:// URL")?
                    .timeout(Some(Duration::from_secs(20)))
                    .build(),
            )),
            None => {
                let dir = data_dir.join("outbox");
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                Ok(Transport::Files(dir))
            }
        }
    }
}

/// Why a delivery failed: retry later, or never.
enum Failure {
    Retry(String),
    Permanent(String),
}

/// The recipient as lettre takes it (D8 revised): the stored address in NFC
/// (a message queued by an older version may hold another form), the domain
/// as its IDNA A-label in the envelope and the `To` header, the local part
/// unchanged, so a non-ASCII one goes out as UTF-8 (lettre asks the server
/// for SMTPUTF8 itself when an envelope address is not ASCII, and fails the
/// send if the server does not offer it).
pub fn recipient(to: &str) -> Result<Mailbox, String> {
    let email = Email::parse(to)?;
    let address = Address::new(email.local_part(), email.ascii_domain())
        .map_err(|e| format!("{e} ({})", email.delivery_form()))?;
    Ok(Mailbox::new(None, address))
}

fn build(m: &OutboxMessage, from: &str) -> Result<Message, Failure> {
    let to = recipient(&m.email.to)
        .map_err(|e| Failure::Permanent(format!("bad recipient {}: {e}", m.email.to)))?;
    let from = from
        .parse()
        .map_err(|e| Failure::Permanent(format!("bad sender {from}: {e}")))?;
    Message::builder()
        .from(from)
        .to(to)
        .subject(m.email.subject.clone())
        .message_id(Some(format!(
            "<outbox-{}-{}@gatehouse>",
            m.id,
            m.created_at.millis()
        )))
        .header(ContentType::TEXT_PLAIN)
        .body(m.email.body.clone())
        .map_err(|e| Failure::Permanent(e.to_string()))
}

async fn deliver(transport: &Transport, m: &OutboxMessage, from: &str) -> Result<(), Failure> {
    let msg = build(m, from)?;
    match transport {
        Transport::Files(dir) => {
            let name = format!("{:020}-{}.eml", m.created_at.millis(), m.id);
            let tmp = dir.join(format!(".{name}.tmp"));
            let bytes = msg.formatted();
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || -> std::io::Result<()> {
                use std::io::Write;
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&bytes)?;
                f.sync_all()?;
                std::fs::rename(&tmp, dir.join(name))?;
                Ok(())
            })
            .await
            .map_err(|e| Failure::Retry(e.to_string()))?
            .map_err(|e| Failure::Retry(e.to_string()))
        }
        Transport::Smtp(smtp) => match smtp.send(msg).await {
            Ok(_) => Ok(()),
            // A 5xx, or a message this client refuses to send as it is (a
            // non-ASCII local part to a relay without SMTPUTF8, D8 revised):
            // retrying cannot help, and a message must not sit in the outbox
            // for ever.
            Err(e) if e.is_permanent() || e.is_client() => Err(Failure::Permanent(e.to_string())),
            Err(e) => Err(Failure::Retry(e.to_string())),
        },
    }
}

/// Runs until `stop` turns true: rounds of [`App::deliver_outbox`], a
/// short sleep when a round found nothing due.
pub async fn worker(app: App, transport: Transport, from: String, mut stop: watch::Receiver<bool>) {
    let (transport, from) = (&transport, from.as_str());
    loop {
        let claimed = app
            .deliver_outbox(|m| async move {
                match deliver(transport, &m, from).await {
                    Ok(()) => Delivery::Sent,
                    Err(Failure::Retry(e)) => Delivery::Retry(e),
                    Err(Failure::Permanent(e)) => Delivery::Permanent(e),
                }
            })
            .await;
        if claimed == 0 {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        } else if *stop.borrow() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{build, recipient};
    use gatehouse_app::outbox::{OutboundEmail, OutboxMessage};
    use gatehouse_domain::{Email, Timestamp};
    use proptest::prelude::*;

    fn message(to: &str) -> OutboxMessage {
        OutboxMessage {
            id: 7,
            attempts: 0,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            email: OutboundEmail {
                to: to.into(),
                subject: "Invitation".into(),
                body: "Hello".into(),
            },
        }
    }

    #[test]
    fn recipients_go_out_with_the_a_label_and_a_utf8_local_part() {
        // D8 (revised): NFD input is sent in NFC; the domain as its A-label.
        let m = build(
            &message("Jose\u{301}@B\u{fc}cher.example"),
            "noreply@gatehouse.test",
        )
        .unwrap_or_else(|_| panic!("refused"));
        let text = String::from_utf8(m.formatted()).unwrap();
        assert!(
            text.contains("To: Jos\u{e9}@xn--bcher-kva.example\r\n"),
            "{text}"
        );
        let env = m.envelope();
        assert_eq!(env.to()[0].to_string(), "Jos\u{e9}@xn--bcher-kva.example");
        let ascii = recipient("ada@example.com").unwrap();
        assert_eq!(ascii.email.to_string(), "ada@example.com");
        // An address lettre refuses is a permanent failure, never a retry.
        assert!(matches!(
            build(&message("j\u{301}@x.com"), "noreply@gatehouse.test"),
            Err(super::Failure::Permanent(_))
        ));
    }

    // Case count: proptest's default (256) unless PROPTEST_CASES says otherwise.
    proptest! {
        /// D8 (revised): every address the API accepts is one lettre
        /// accepts after the delivery conversion, so none sticks in the
        /// outbox.
        #[test]
        fn every_accepted_address_is_deliverable(
            s in prop_oneof![
                any::<String>(),
                (
                    "[a-zA-Z0-9.+_'!#$%&*/=?^`{|}~\u{e9}\u{c9}\u{301}\u{df}\u{130}\u{3a3}\u{4f8b}\u{1f600}\"-]{1,12}",
                    "[a-zA-Z0-9.\u{fc}\u{dc}\u{df}\u{4f8b}\u{301}\u{3002}_-]{1,12}",
                    "[a-zA-Z\u{6d4b}]{1,4}",
                )
                    .prop_map(|(l, d, t)| format!("{l}@{d}.{t}")),
            ]
        ) {
            if let Ok(e) = Email::parse(&s) {
                let to = recipient(e.as_str());
                prop_assert!(to.is_ok(), "{:?} accepted but lettre refuses: {:?}", e.as_str(), to.err());
                prop_assert!(
                    build(&message(e.as_str()), "noreply@gatehouse.test").is_ok(),
                    "{:?}: the message does not build", e.as_str()
                );
                // The address as text parses back as a lettre address too.
                prop_assert!(e.delivery_form().parse::<lettre::Address>().is_ok());
            }
        }
    }
}
