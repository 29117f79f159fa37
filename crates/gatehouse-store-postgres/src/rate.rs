//! PostgreSQL: rate windows shared by the nodes of one store (D28, D44).

use super::*;

/// D28's shared windows count admissions in buckets of this many ms
/// ("counting in sub-second buckets is fine").
pub(crate) const RATE_BUCKET_MS: i64 = 100;
/// Buckets in the one-second and one-minute windows.
pub(crate) const RATE_SECOND_BUCKETS: i64 = 1000 / RATE_BUCKET_MS;
pub(crate) const RATE_MINUTE_BUCKETS: i64 = 60_000 / RATE_BUCKET_MS;

#[async_trait]
impl RateStore for PgStore {
    fn shares_rate_limits(&self) -> bool {
        true
    }
    async fn count_request(
        &self,
        lineage: &str,
        per_minute: u32,
        per_second: u32,
        now: Timestamp,
    ) -> StoreResult<Option<SharedWindow>> {
        let bucket = now.millis().div_euclid(RATE_BUCKET_MS);
        // One round trip: `gatehouse_count_request` (migration 0003) takes
        // the lineage's advisory lock, reads the windows after it and counts
        // the request when admitted, so no two nodes both take the last place.
        let row = typed(async {
            Ok(query(
                "SELECT admitted, in_minute, in_second, oldest_minute, oldest_second
                 FROM gatehouse_count_request($1, $2, $3, $4, $5, $6)",
            )
            .bind(lineage)
            .bind(bucket)
            .bind(i64::from(per_minute))
            .bind(i64::from(per_second))
            .bind(RATE_MINUTE_BUCKETS)
            .bind(RATE_SECOND_BUCKETS)
            .fetch_one(&self.pool)
            .await?)
        })
        .await
        .map_err(TxError::into_store)?;
        let window = typed(async {
            let admitted: bool = row.try_get(0)?;
            let minute: i64 = row.try_get(1)?;
            let second: i64 = row.try_get(2)?;
            let oldest_minute: Option<i64> = row.try_get(3)?;
            let oldest_second: Option<i64> = row.try_get(4)?;
            let counted = i64::from(admitted);
            let frees = |oldest: Option<i64>, span: i64| {
                oldest
                    .or(admitted.then_some(bucket))
                    .map(|b| (b + span) * RATE_BUCKET_MS)
            };
            Ok(SharedWindow {
                admitted,
                in_minute: (minute + counted).clamp(0, i64::from(u32::MAX)) as u32,
                in_second: (second + counted).clamp(0, i64::from(u32::MAX)) as u32,
                minute_frees_at: frees(oldest_minute, RATE_MINUTE_BUCKETS),
                second_frees_at: frees(oldest_second, RATE_SECOND_BUCKETS),
            })
        })
        .await
        .map_err(TxError::into_store)?;
        Ok(Some(window))
    }

    async fn lease_requests(
        &self,
        lineage: &str,
        per_minute: u32,
        per_second: u32,
        want: u32,
        returned: Option<(Timestamp, u32)>,
        now: Timestamp,
    ) -> StoreResult<Option<(u32, SharedWindow)>> {
        let bucket = now.millis().div_euclid(RATE_BUCKET_MS);
        let (returned_bucket, returned_n) = returned.map_or((0, 0), |(at, n)| {
            (at.millis().div_euclid(RATE_BUCKET_MS), i64::from(n))
        });
        // One round trip, under the lineage's lock like a single decision
        // (migration 13).
        let row = query(
            "SELECT granted, in_minute, in_second, oldest_minute, oldest_second
             FROM gatehouse_lease_requests($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(lineage)
        .bind(bucket)
        .bind(i64::from(per_minute))
        .bind(i64::from(per_second))
        .bind(RATE_MINUTE_BUCKETS)
        .bind(RATE_SECOND_BUCKETS)
        .bind(i64::from(want.max(1)))
        .bind(returned_bucket)
        .bind(returned_n)
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)?;
        let get = |i: usize| row.try_get::<Option<i64>, _>(i).map_err(db_err);
        let granted = get(0)?.unwrap_or(0).clamp(0, i64::from(u32::MAX));
        let (minute, second) = (get(1)?.unwrap_or(0), get(2)?.unwrap_or(0));
        let frees = |oldest: Option<i64>, span: i64| {
            oldest
                .or((granted > 0).then_some(bucket))
                .map(|b| (b + span) * RATE_BUCKET_MS)
        };
        Ok(Some((
            granted as u32,
            SharedWindow {
                admitted: granted > 0,
                // The counts include the whole lease.
                in_minute: (minute + granted).clamp(0, i64::from(u32::MAX)) as u32,
                in_second: (second + granted).clamp(0, i64::from(u32::MAX)) as u32,
                minute_frees_at: frees(get(3)?, RATE_MINUTE_BUCKETS),
                second_frees_at: frees(get(4)?, RATE_SECOND_BUCKETS),
            },
        )))
    }
}
