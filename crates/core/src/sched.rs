//! Wait queues and timed sleeps (kernel/sched/wait.c, schedule_timeout).
//!
//! The kernel parks a task on a wait queue and lets another path wake it, often with a
//! timeout as a backstop: reclaim_throttle() (woken when isolation drops, or after HZ/50),
//! kswapd's short nap (woken by wakeup_kswapd, or after HZ/10), direct reclaimers held in
//! throttle_direct_reclaim() until kswapd restores the pfmemalloc reserve, and tasks
//! waiting for the oom_lock mutex. A [`WaitQueue`] holds the parked tasks in arrival
//! order; [`Sim::wait_event_timeout`] parks the current task until a waker or the timeout
//! comes first and says which one did.
//!
//! Implementation: the timeout is a short-lived timer task spawned at the deadline on the
//! waiter's CPU; whichever of timer and waker finds the waiter still waiting wakes it,
//! and the other does nothing. Simplified: every waiter is non-exclusive (wake_up wakes
//! them all), which is what the queues above use.

use crate::engine::{TaskId, Time};
use crate::sim::Sim;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// Where a waiter is: still waiting, woken by a waker, or woken by its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitState {
    Waiting,
    Woken,
    TimedOut,
}

struct Waiter {
    task: TaskId,
    state: Cell<WaitState>,
}

/// wait_queue_head_t: the tasks waiting for one condition, in arrival order.
#[derive(Default)]
pub struct WaitQueue {
    waiters: RefCell<Vec<Rc<Waiter>>>,
}

impl WaitQueue {
    /// waitqueue_active(): is anybody waiting?
    pub fn active(&self) -> bool {
        !self.waiters.borrow().is_empty()
    }

    fn remove(&self, w: &Rc<Waiter>) {
        self.waiters.borrow_mut().retain(|x| !Rc::ptr_eq(x, w));
    }
}

impl Sim {
    /// wake_up_all() / wake_up() of non-exclusive waiters: every task waiting on `wq` is
    /// woken at the current task's time. Returns how many were woken.
    pub fn wake_up_all(&self, wq: &WaitQueue) -> usize {
        let woken: Vec<Rc<Waiter>> = std::mem::take(&mut *wq.waiters.borrow_mut());
        let now = self.e.now();
        for w in &woken {
            w.state.set(WaitState::Woken);
            self.e.wake(w.task, now);
        }
        woken.len()
    }

    /// prepare_to_wait() + schedule_timeout(): park the current task on `wq` until a
    /// waker or `timeout` ns (None: no timeout) come first. Returns true when it was
    /// woken before the timeout (schedule_timeout's "remaining" is non-zero).
    pub async fn wait_event_timeout(&self, wq: &Rc<WaitQueue>, timeout: Option<Time>) -> bool {
        let w = Rc::new(Waiter {
            task: self.e.current(),
            state: Cell::new(WaitState::Waiting),
        });
        wq.waiters.borrow_mut().push(w.clone());
        if let Some(t) = timeout {
            let deadline = self.e.now() + t;
            let (s, wq2, w2) = (self.self_rc(), wq.clone(), w.clone());
            self.e.spawn(deadline, self.e.cpu(), async move {
                if w2.state.get() == WaitState::Waiting {
                    w2.state.set(WaitState::TimedOut);
                    wq2.remove(&w2);
                    s.e.wake(w2.task, deadline);
                }
            });
        }
        self.e.park().await;
        w.state.get() == WaitState::Woken
    }
}
