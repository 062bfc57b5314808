// splatgen: provoke kernel splats on purpose, to capture real console
// output for klab's splat corpus. Load with what=<name>; see ../README.md for the list.
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/list.h>
#include <linux/refcount.h>
#include <linux/mm.h>
#include <linux/kfence.h>
#include <linux/sched.h>
#include <linux/preempt.h>
#include <linux/rcupdate.h>
#include <linux/spinlock.h>

static char *what = "warn";
module_param(what, charp, 0444);

static DEFINE_MUTEX(splatgen_mutex);
static DEFINE_SPINLOCK(splatgen_lock);

static noinline void splatgen_warn(void)
{
	WARN_ON(1);
}

static noinline void splatgen_warn_msg(void)
{
	WARN(1, "splatgen: device %s is in a bad state\n", "sg0");
}

static noinline void splatgen_bug(void)
{
	BUG();
}

static noinline int splatgen_null(void)
{
	int *volatile p = NULL;
	return *p;
}

static noinline int splatgen_pagefault(void)
{
	int *p = vmalloc(PAGE_SIZE);
	if (!p)
		return -ENOMEM;
	vfree(p);
	return READ_ONCE(*p);
}

static noinline int splatgen_gpf(void)
{
	int *volatile p = (int *)0xdead000000000100UL;
	return *p;
}

static noinline void splatgen_atomic_sleep(void)
{
	spin_lock(&splatgen_lock);
	msleep(10);
	spin_unlock(&splatgen_lock);
}

static noinline void splatgen_spin(unsigned int ms)
{
	preempt_disable();
	mdelay(ms);
	preempt_enable();
}

static int splatgen_sync(void *arg)
{
	synchronize_rcu();
	return 0;
}

static noinline void splatgen_rcu_stall(void)
{
	kthread_run(splatgen_sync, NULL, "splatgen-sync");
	msleep(100);
	rcu_read_lock();
	splatgen_spin(12000);
	rcu_read_unlock();
}

static int splatgen_holder(void *arg)
{
	mutex_lock(&splatgen_mutex);
	schedule_timeout_uninterruptible(12 * HZ);
	mutex_unlock(&splatgen_mutex);
	return 0;
}

static int splatgen_waiter(void *arg)
{
	msleep(200);
	mutex_lock(&splatgen_mutex);
	mutex_unlock(&splatgen_mutex);
	return 0;
}

static noinline void splatgen_list(void)
{
	static LIST_HEAD(head);
	static struct list_head a, b;

	list_add(&a, &head);
	a.prev = &b; /* corrupt */
	list_add(&b, &head);
}

static noinline void splatgen_list_del(void)
{
	static LIST_HEAD(head);
	static struct list_head a;

	list_add(&a, &head);
	a.next = LIST_POISON1;
	list_del(&a);
}

static noinline void splatgen_refcount(void)
{
	refcount_t r = REFCOUNT_INIT(0);
	refcount_dec_and_test(&r);
}

static noinline int splatgen_ubsan(void)
{
	int arr[4] = { 1, 2, 3, 4 };
	volatile int i = 5;
	return arr[i];
}

static noinline int splatgen_shift(void)
{
	volatile int s = 40;
	return 1 << s;
}

static noinline int splatgen_kfence(int oob)
{
#ifdef CONFIG_KFENCE
	int tries;
	char *p = NULL;

	for (tries = 0; tries < 200000; tries++) {
		p = kmalloc(32, GFP_KERNEL);
		if (!p)
			return -ENOMEM;
		if (is_kfence_address(p))
			break;
		kfree(p);
		p = NULL;
		if (tries % 100 == 0)
			msleep(1);
	}
	if (!p) {
		pr_info("splatgen: no kfence object\n");
		return -EAGAIN;
	}
	if (oob)
		return READ_ONCE(p[32]);
	kfree(p);
	return READ_ONCE(p[8]);
#else
	return -EOPNOTSUPP;
#endif
}

static noinline void splatgen_bad_page(void)
{
	struct page *page = alloc_page(GFP_KERNEL);

	if (!page)
		return;
	page->mapping = (void *)0x1234;
	__free_page(page);
}

static noinline void splatgen_sleep_blocked(void)
{
	mutex_lock(&splatgen_mutex);
	schedule_timeout_uninterruptible(3 * HZ);
	mutex_unlock(&splatgen_mutex);
}

static int __init splatgen_init(void)
{
	pr_info("splatgen: %s\n", what);
	if (!strcmp(what, "warn"))
		splatgen_warn();
	else if (!strcmp(what, "warn_msg"))
		splatgen_warn_msg();
	else if (!strcmp(what, "bug"))
		splatgen_bug();
	else if (!strcmp(what, "null"))
		return splatgen_null();
	else if (!strcmp(what, "pagefault"))
		return splatgen_pagefault();
	else if (!strcmp(what, "gpf"))
		return splatgen_gpf();
	else if (!strcmp(what, "atomic_sleep"))
		splatgen_atomic_sleep();
	else if (!strcmp(what, "softlockup"))
		splatgen_spin(6000);
	else if (!strcmp(what, "rcu_stall")) {
		splatgen_rcu_stall();
		return 0; /* stay loaded: the thread runs our code */
	}
	else if (!strcmp(what, "hung")) {
		kthread_run(splatgen_holder, NULL, "splatgen-holder");
		kthread_run(splatgen_waiter, NULL, "splatgen-waiter");
		return 0; /* stay loaded: the threads run our code */
	} else if (!strcmp(what, "list"))
		splatgen_list();
	else if (!strcmp(what, "list_del"))
		splatgen_list_del();
	else if (!strcmp(what, "refcount"))
		splatgen_refcount();
	else if (!strcmp(what, "ubsan"))
		pr_info("splatgen: %d\n", splatgen_ubsan());
	else if (!strcmp(what, "shift"))
		pr_info("splatgen: %d\n", splatgen_shift());
	else if (!strcmp(what, "kfence"))
		pr_info("splatgen: %d\n", splatgen_kfence(0));
	else if (!strcmp(what, "kfence_oob"))
		pr_info("splatgen: %d\n", splatgen_kfence(1));
	else if (!strcmp(what, "bad_page"))
		splatgen_bad_page();
	else if (!strcmp(what, "blocked")) {
		kthread_run(splatgen_holder, NULL, "splatgen-holder");
		kthread_run(splatgen_waiter, NULL, "splatgen-waiter");
		return 0;
	} else
		return -EINVAL;
	return -EAGAIN;
}

module_init(splatgen_init);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("provoke kernel splats for a test corpus");
