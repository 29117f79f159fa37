//! Webhook delivery (D55): the worker every serving process runs. Each
//! round fans sequenced events out to the endpoints that want them, leases
//! the due deliveries (the store holds the per-endpoint limit and the
//! `per_object` order across processes), signs and sends each through the
//! process's [`Deliver`], and records what followed. On shutdown no attempt
//! starts; one cut short is given back uncounted, to be made again (D43
//! continued).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use gatehouse_domain::event::Origin;
use gatehouse_domain::webhook::{self, AttemptError, Next, RetrySchedule};
use gatehouse_domain::{Timestamp, random};
use gatehouse_store::{Claimed, Made};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::error::{AppResult, OrApp};
use crate::{App, Resource};

/// One signed request of an attempt.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub url: String,
    /// `webhook-id`: the event's id.
    pub id: String,
    /// `webhook-timestamp`: the attempt's Unix seconds.
    pub timestamp: i64,
    /// `webhook-signature`: `v1,<sig>` (two during a rotation's grace).
    pub signature: String,
    pub body: Vec<u8>,
}

/// What an attempt got.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    pub status: Option<u16>,
    pub error: Option<AttemptError>,
    /// At most 4 KiB of the answer.
    pub excerpt: String,
    pub retry_after: Option<Duration>,
    pub duration: Duration,
}

/// Sends one attempt: the address rules at connect time, no redirects, the
/// timeouts (the serving binary's `webhook_sender`).
#[async_trait]
pub trait Deliver: Send + Sync {
    async fn deliver(&self, request: &Outgoing) -> Reply;
}

/// The worker's settings (D55, D40 continued).
#[derive(Clone, Debug)]
pub struct DeliverySettings {
    /// This process, as its leases name it.
    pub node: String,
    pub schedule: RetrySchedule,
    /// `GATEHOUSE_WEBHOOK_MAX_IN_FLIGHT`.
    pub max_in_flight: u32,
    /// `GATEHOUSE_WEBHOOK_TIMEOUT`: a whole attempt.
    pub timeout: Duration,
    /// How often the worker looks for work when nothing wakes it.
    pub tick: Duration,
    /// How long attempts in flight may finish after a stop (D43).
    pub drain: Duration,
    /// `GATEHOUSE_WEBHOOK_DISABLE_AFTER`: failing this long, an endpoint
    /// is disabled (`failing`).
    pub disable_after: Duration,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            node: format!("node-{}", random::base62(64)),
            schedule: RetrySchedule::default(),
            max_in_flight: 10,
            timeout: Duration::from_secs(15),
            tick: Duration::from_millis(100),
            drain: Duration::from_secs(25),
            disable_after: Duration::from_secs(5 * 86_400),
        }
    }
}

/// A finished (or panicked) attempt's task, as its set hands it back.
type Joined = Result<(tokio::task::Id, ()), tokio::task::JoinError>;

/// This process's attempts in flight, each with the delivery it leased.
#[derive(Default)]
struct InFlight {
    tasks: JoinSet<()>,
    leases: HashMap<tokio::task::Id, i64>,
}

impl InFlight {
    fn start(&mut self, delivery: i64, attempt: impl Future<Output = ()> + Send + 'static) {
        let handle = self.tasks.spawn(attempt);
        self.leases.insert(handle.id(), delivery);
    }

    /// An attempt ended, recorded or not (a panicked one's lease runs out):
    /// its delivery is no longer this process's to give back.
    fn ended(&mut self, done: Joined) {
        let id = match done {
            Ok((id, ())) => id,
            Err(e) => e.id(),
        };
        self.leases.remove(&id);
    }

    /// At shutdown: stops what is still running and answers the deliveries
    /// those attempts had leased, to give back uncounted (D43 continued).
    fn cut_short(mut self) -> Vec<i64> {
        self.tasks.abort_all();
        self.leases.into_values().collect()
    }
}

/// Deliveries leased per round at most.
const CLAIM_BATCH: u32 = 64;
/// Events fanned out per organization per round at most.
const FAN_OUT_BATCH: u32 = 500;

impl App {
    /// Runs the delivery worker until `stop` turns true, then lets the
    /// attempts in flight finish within `settings.drain` and gives the
    /// rest back.
    pub async fn run_deliveries(
        self,
        deliver: Arc<dyn Deliver>,
        settings: DeliverySettings,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut flying = InFlight::default();
        let mut tick = tokio::time::interval(settings.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut rounds = 0u64;
        // Leases a killed process left (SQLite) are due again at once, not
        // only when they run out (D43 continued).
        match delivery_store(&self).release_orphaned_leases().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                deliveries = n,
                "webhook deliveries a stopped process had leased are due again"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "giving back leases of a stopped process failed; they run out instead")
            }
        }
        // Until an organization has an endpoint the worker only asks, once
        // a second, whether one has (no sequencing, no claims).
        let mut active = false;
        loop {
            enum Woke {
                Tick,
                Finished(Joined),
                Stop,
            }
            let woke = tokio::select! {
                _ = tick.tick() => Woke::Tick,
                Some(done) = flying.tasks.join_next_with_id(), if !flying.tasks.is_empty() => {
                    Woke::Finished(done)
                }
                _ = stop.wait_for(|s| *s) => Woke::Stop,
            };
            match woke {
                Woke::Stop => break,
                Woke::Tick => {}
                Woke::Finished(done) => {
                    flying.ended(done);
                    // Every attempt that finished meanwhile, then one claim:
                    // a freed slot is filled at once, not at the next tick,
                    // so an endpoint's throughput is not capped at
                    // max-in-flight per tick.
                    while let Some(done) = flying.tasks.try_join_next_with_id() {
                        flying.ended(done);
                    }
                    if active
                        && let Err(e) = self.claim_round(&deliver, &settings, &mut flying).await
                    {
                        tracing::warn!(error = %e, "claiming webhook deliveries failed; retried next round");
                    }
                    continue;
                }
            }
            rounds += 1;
            if !active {
                if !(rounds == 1 || rounds.is_multiple_of(10)) {
                    continue;
                }
                match delivery_store(&self).has_webhooks().await {
                    Ok(true) => active = true,
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "looking for webhook endpoints failed");
                        continue;
                    }
                }
            }
            if let Err(e) = self.delivery_round(&deliver, &settings, &mut flying).await {
                tracing::warn!(error = %e, "a webhook delivery round failed; retried next round");
            }
            // D55's `webhook_queue_depth`, every 50 rounds (5 s by default).
            if rounds.is_multiple_of(50) {
                match delivery_store(&self).queue_depth().await {
                    Ok(n) => metrics::gauge!("webhook_queue_depth").set(n as f64),
                    Err(e) => {
                        tracing::warn!(error = %e, "counting pending webhook deliveries failed")
                    }
                }
            }
        }
        // D43 (continued): no attempt starts now; those in flight have the
        // drain to finish; one cut short is given back, uncounted.
        let deadline = tokio::time::sleep(settings.drain);
        tokio::pin!(deadline);
        while !flying.tasks.is_empty() {
            tokio::select! {
                Some(done) = flying.tasks.join_next_with_id() => flying.ended(done),
                _ = &mut deadline => break,
            }
        }
        let cut = flying.cut_short();
        if !cut.is_empty()
            && let Err(e) = delivery_store(&self)
                .release_deliveries(&settings.node, &cut)
                .await
        {
            tracing::warn!(error = %e, "giving back webhook deliveries cut short failed; their leases run out instead");
        }
    }

    /// One round: fan out, lease what is due, start its attempts.
    async fn delivery_round(
        &self,
        deliver: &Arc<dyn Deliver>,
        settings: &DeliverySettings,
        flying: &mut InFlight,
    ) -> AppResult<()> {
        // Events are delivered once sequenced (D54): each round sequences
        // what has committed (a no-op on SQLite, whose writes sequence their
        // own), so an event waits at most a tick for its delivery to start
        // rather than for the 500 ms background job.
        // A failure here holds back only the events not sequenced yet:
        // those already sequenced are fanned out and delivered regardless.
        if let Err(e) = self.sequence_events().await {
            tracing::warn!(error = %e, "sequencing events before a delivery round failed");
        }
        delivery_store(self)
            .fan_out(Timestamp::now(), FAN_OUT_BATCH)
            .await
            .or_app(Resource::Storage)?;
        self.claim_round(deliver, settings, flying).await
    }

    /// Leases what is due and starts its attempts.
    async fn claim_round(
        &self,
        deliver: &Arc<dyn Deliver>,
        settings: &DeliverySettings,
        flying: &mut InFlight,
    ) -> AppResult<()> {
        let store = delivery_store(self);
        let now = Timestamp::now();
        // A lease outlives the longest attempt, so two processes never
        // make one attempt at once (D44).
        let lease_ms = i64::try_from((settings.timeout + Duration::from_secs(30)).as_millis())
            .unwrap_or(i64::MAX);
        let claimed = store
            .claim_deliveries(
                &settings.node,
                now,
                now.plus_millis(lease_ms),
                settings.max_in_flight,
                CLAIM_BATCH,
            )
            .await
            .or_app(Resource::Storage)?;
        for c in claimed {
            let (app, deliver, settings) = (self.clone(), deliver.clone(), settings.clone());
            flying.start(c.delivery, async move {
                if let Err(e) = app.attempt(&deliver, &settings, &c).await {
                    tracing::warn!(error = %e, endpoint = %c.endpoint, event = %c.event, "a webhook attempt could not be recorded; its lease runs out and it is made again");
                }
            });
        }
        Ok(())
    }

    /// Makes one attempt of `c` and records it.
    async fn attempt(
        &self,
        deliver: &Arc<dyn Deliver>,
        settings: &DeliverySettings,
        c: &Claimed,
    ) -> AppResult<()> {
        // Fanned out, so sequenced already: read as stored, without the
        // wait for sequencing a client's read of `/v1/events` makes.
        let store: &dyn gatehouse_store::EventStore = self.0.store.as_ref();
        let event = store
            .get_event(&c.org, &c.event)
            .await
            .or_app(Resource::Event)?
            .ok_or(crate::AppError::NotFound(Resource::Event))?;
        let body = self.0.publish.event(&c.org, &event).into_bytes();
        let started = Timestamp::now();
        let keys = self
            .endpoint_signing_keys(&c.org, &c.endpoint, started)
            .await?;
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let timestamp = started.unix_seconds();
        let signature =
            gatehouse_auth::webhooks::signature_header(&keys, c.event.as_str(), timestamp, &body);
        let request = Outgoing {
            url: c.url.clone(),
            id: c.event.to_string(),
            timestamp,
            signature,
            body,
        };
        let clock = Instant::now();
        let reply = deliver.deliver(&request).await;
        let duration = if reply.duration.is_zero() {
            clock.elapsed()
        } else {
            reply.duration
        };
        // ±20 % on the retries (D55): a uniform draw in [-1, 1].
        let jitter = f64::from(u16::from_le_bytes(random::bytes::<2>())) / 32_767.5 - 1.0;
        let now = Timestamp::now();
        let next = if reply.error.is_some() && reply.status.is_none() {
            webhook::next_step(&settings.schedule, c.attempt, None, None, jitter, now)
        } else {
            webhook::next_step(
                &settings.schedule,
                c.attempt,
                reply.status,
                reply.retry_after,
                jitter,
                now,
            )
        };
        // A redirect is an answer that fails (never followed, D55).
        let next = match (next, reply.error) {
            (Next::Done, Some(_)) => {
                webhook::next_step(&settings.schedule, c.attempt, None, None, jitter, now)
            }
            (n, _) => n,
        };
        // D55's metrics: each attempt's outcome, and from commit to the
        // first attempt.
        let outcome = match next {
            Next::Done => "succeeded",
            Next::RetryAt(_) => "failed",
            Next::Exhausted => "exhausted",
            Next::Gone => "gone",
        };
        metrics::counter!("webhook_deliveries_total", "outcome" => outcome).increment(1);
        if c.attempt == 1 && c.trigger == webhook::Trigger::Scheduled {
            let waited = started
                .millis()
                .saturating_sub(event.event.created_at.millis());
            metrics::histogram!("webhook_delivery_latency_seconds").record(waited as f64 / 1_000.0);
        }
        let made = Made {
            started_at: started,
            duration_ms: i64::try_from(duration.as_millis()).unwrap_or(i64::MAX),
            response_status: reply.status,
            error: reply.error,
            excerpt: reply.excerpt,
        };
        let finished = delivery_store(self)
            .finish_attempt(
                &settings.node,
                c,
                &made,
                next,
                settings.disable_after,
                &self.teller(&Origin::system()),
            )
            .await
            .or_app(Resource::WebhookEndpoint)?;
        // D55: the admins hear of an endpoint disabled, or failing (at most
        // once a day; the store recorded when).
        let notice = match (&finished.disabled, &finished.mail_failing) {
            (Some(e), _) => Some(disabled_notice(e, self.public_url())),
            (None, Some(e)) => Some(failing_notice(e, self.public_url())),
            (None, None) => None,
        };
        if let Some((subject, body)) = notice
            && let Err(e) = delivery_store(self)
                .mail_admins(&c.org, &subject, &body, Timestamp::now())
                .await
        {
            tracing::warn!(error = %e, endpoint = %c.endpoint, "queuing the admins' webhook e-mail failed");
        }
        Ok(())
    }
}

/// How an e-mail names an endpoint: its id, description and host (never
/// the whole URL, which may carry a credential of the receiver's).
fn endpoint_name(e: &webhook::Endpoint) -> String {
    let host = webhook::host_of(&e.url);
    if e.description.is_empty() {
        format!("{} (to {host})", e.id)
    } else {
        format!("{} \"{}\" (to {host})", e.id, e.description)
    }
}

/// D55: "deliveries failing", when an event exhausts its schedule.
fn failing_notice(e: &webhook::Endpoint, public_url: &str) -> (String, String) {
    (
        "Webhook deliveries are failing".into(),
        format!(
            "Deliveries to your organization's webhook endpoint {} are failing: an event \
             has used up all its attempts and will not be sent again unless it is replayed.\n\n\
             The delivery log says why: GET {public_url}/v1/webhook-endpoints/{}/attempts\n\
             If the endpoint keeps failing it will be disabled.\n",
            endpoint_name(e),
            e.id
        ),
    )
}

/// D55: an endpoint disabled by the service (`gone` or `failing`).
fn disabled_notice(e: &webhook::Endpoint, public_url: &str) -> (String, String) {
    let why = match e.disabled {
        Some(webhook::DisabledReason::Gone) => "it answered 410 Gone",
        _ => "its deliveries kept failing",
    };
    (
        "A webhook endpoint was disabled".into(),
        format!(
            "Your organization's webhook endpoint {} was disabled because {why}; it receives \
             nothing until an admin enables it again (PATCH {public_url}/v1/webhook-endpoints/{} \
             with {{\"status\": \"enabled\"}}). Deliveries it had pending were cancelled; \
             enabling it replays nothing (use replay for that).\n",
            endpoint_name(e),
            e.id
        ),
    )
}

/// This area's view of storage: the `DeliveryStore` trait only (issue 25).
fn delivery_store(app: &App) -> &dyn gatehouse_store::DeliveryStore {
    app.0.store.as_ref()
}
