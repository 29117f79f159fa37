//! SQLite: the e-mail outbox (D30).

use super::*;

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn claim_outbox(
        &self,
        now: Timestamp,
        limit: u32,
        lease_ms: i64,
    ) -> StoreResult<Vec<OutboxMessage>> {
        self.pool
            .write(move |tx| {
                let mut s = tx
                    .prepare_cached(
                        "UPDATE outbox SET locked_until = ?1 + ?2, attempts = attempts + 1
                         WHERE id IN (SELECT id FROM outbox WHERE sent_at IS NULL AND next_attempt_at <= ?1 AND locked_until <= ?1 ORDER BY next_attempt_at, id LIMIT ?3)
                         RETURNING id, recipient, subject, body, attempts, created_at",
                    )
                    .map_err(db_err)?;
                let rows = s
                    .query_map(params![now.millis(), lease_ms, limit], |r| {
                        Ok(OutboxMessage {
                            id: r.get(0)?,
                            email: OutboundEmail { to: r.get(1)?, subject: r.get(2)?, body: r.get(3)? },
                            attempts: r.get::<_, i64>(4)? as u32,
                            created_at: Timestamp::from_millis(r.get(5)?),
                        })
                    })
                    .map_err(db_err)?;
                let mut v = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)?;
                v.sort_by_key(|m| m.id);
                Ok(v)
            })
            .await
    }
    async fn outbox_sent(&self, id: i64, now: Timestamp) -> StoreResult<()> {
        self.pool
            .write(move |tx| {
                tx.prepare_cached("UPDATE outbox SET sent_at = ?2, locked_until = 0, last_error = NULL WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![id, now.millis()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }
    async fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        next_attempt_at: Timestamp,
    ) -> StoreResult<()> {
        let error = gatehouse_store::outbox_error_text(error);
        self.pool
            .write(move |tx| {
                tx.prepare_cached("UPDATE outbox SET last_error = ?2, next_attempt_at = ?3, locked_until = 0 WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![id, error, next_attempt_at.millis()]))
                    .map_err(db_err)?;
                Ok(())
            })
            .await
    }
    async fn outbox_backlog(&self) -> StoreResult<u64> {
        self.pool
            .read(|c| count(c, "SELECT count(*) FROM outbox WHERE sent_at IS NULL", &[]))
            .await
    }
}
