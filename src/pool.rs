//! The one worker pool: scoped threads taking items in order from a shared
//! counter, for hashing, linking, verifying and transfers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The threads worth starting for `items` with at most `max` at once.
pub fn threads_for(items: usize, max: usize) -> usize {
    max.clamp(1, items.max(1))
}

/// This machine's cores, at most `max`.
pub fn cores(max: usize) -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(max))
}

/// Runs `work` on every item on `threads` scoped threads, each thread with
/// its own state from `init` (a buffer, say), and returns the results in item
/// order. After the first error no further item is started, and that error
/// is returned.
pub fn map<T, S, R, E>(
    items: &[T],
    threads: usize,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, &T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
{
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let failure: Mutex<Option<(usize, E)>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads_for(items.len(), threads) {
            scope.spawn(|| {
                let mut state = init();
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    match work(&mut state, item) {
                        Ok(r) => {
                            if let Ok(mut all) = results.lock() {
                                all[i] = Some(r);
                            }
                        }
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            if let Ok(mut f) = failure.lock() {
                                if f.as_ref().is_none_or(|(j, _)| i < *j) {
                                    *f = Some((i, e));
                                }
                            }
                            break;
                        }
                    }
                }
            });
        }
    });
    if let Some((_, e)) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_order_with_per_thread_state() {
        let items: Vec<u32> = (0..1000).collect();
        let out: Result<Vec<u32>, ()> = map(
            &items,
            4,
            || 0u32,
            |seen, x| {
                *seen += 1;
                Ok(x * 2)
            },
        );
        assert_eq!(
            out.unwrap(),
            items.iter().map(|x| x * 2).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_first_error_stops_the_work() {
        let items: Vec<u32> = (0..10_000).collect();
        let started = AtomicUsize::new(0);
        let out: Result<Vec<u32>, u32> = map(
            &items,
            3,
            || (),
            |_, x| {
                started.fetch_add(1, Ordering::Relaxed);
                if *x == 10 {
                    Err(*x)
                } else {
                    Ok(*x)
                }
            },
        );
        assert_eq!(out.unwrap_err(), 10);
        assert!(started.into_inner() < 10_000);
    }

    #[test]
    fn no_items_and_more_threads_than_items_are_fine() {
        let none: Result<Vec<u8>, ()> = map(&[] as &[u8], 8, || (), |_, x| Ok(*x));
        assert_eq!(none.unwrap(), Vec::<u8>::new());
        assert_eq!(threads_for(2, 8), 2);
        assert_eq!(threads_for(0, 8), 1);
    }
}
