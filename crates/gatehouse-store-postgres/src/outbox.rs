//! PostgreSQL: the e-mail outbox (D30).

use super::*;

#[async_trait]
impl OutboxStore for PgStore {
    async fn claim_outbox(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: i64,
    ) -> StoreResult<Vec<OutboxMessage>> {
        write_tx!(self, |tx| {
            // D30, D44: rows another worker is claiming right now are skipped,
            // not waited for; a claimed row carries a lease, so a second
            // claim finds it only once the lease has run out (a dead worker).
            // MATERIALIZED: the locking sub-select runs exactly once.
            let rows = query(
                "WITH due AS MATERIALIZED (
                     SELECT id FROM outbox
                     WHERE sent_at IS NULL AND next_attempt_at <= $1 AND locked_until <= $1
                     ORDER BY next_attempt_at, id
                     LIMIT $3
                     FOR UPDATE SKIP LOCKED)
                 UPDATE outbox o SET locked_until = $1 + $2, attempts = o.attempts + 1
                 FROM due WHERE o.id = due.id
                 RETURNING o.id, o.recipient, o.subject, o.body, o.attempts, o.created_at",
            )
            .bind(now.millis())
            .bind(lease_ms)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
            let mut v = rows
                .iter()
                .map(|r| {
                    Ok(OutboxMessage {
                        id: r.try_get(0)?,
                        email: OutboundEmail {
                            to: r.try_get(1)?,
                            subject: r.try_get(2)?,
                            body: r.try_get(3)?,
                        },
                        attempts: r.try_get::<i32, _>(4)?.max(0) as u32,
                        created_at: Timestamp::from_millis(r.try_get(5)?),
                    })
                })
                .collect::<Result<Vec<_>, sqlx_core::Error>>()?;
            v.sort_by_key(|m| m.id);
            Ok(v)
        })
    }
    async fn outbox_sent(&self, id: i64, now: Timestamp) -> StoreResult<()> {
        write_tx!(self, |tx| {
            query(
                "UPDATE outbox SET sent_at = $2, locked_until = 0, last_error = NULL WHERE id = $1",
            )
            .bind(id)
            .bind(now.millis())
            .execute(&mut *tx)
            .await?;
            Ok(())
        })
    }
    async fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: Timestamp,
    ) -> StoreResult<()> {
        let error = gatehouse_store::outbox_error_text(error);
        write_tx!(self, |tx| {
            query("UPDATE outbox SET last_error = $2, next_attempt_at = $3, locked_until = 0 WHERE id = $1")
                .bind(id)
                .bind(&error)
                .bind(next_attempt_at.millis())
                .execute(&mut *tx)
                .await?;
            Ok(())
        })
    }
    async fn outbox_backlog(&self) -> StoreResult<u64> {
        let n: i64 = query_scalar("SELECT count(*) FROM outbox WHERE sent_at IS NULL")
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(n.max(0) as u64)
    }
}
