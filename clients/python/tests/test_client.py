"""The Python client against a live server ($HETSCHED_TEST_SERVER), run by clients/python's Go test."""

import getpass
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from hetsched import APIError, Client  # noqa: E402


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(os.environ["HETSCHED_TEST_SERVER"], token="", timeout=10)

    def test_submit_get_list_cancel(self):
        t = self.c.submit({"id": "py-1", "name": "py", "lease": "1h", "resources": {"cpu": "1"}})
        self.assertEqual(t.id, "py-1")
        self.assertEqual(t.name, "py")
        self.c.submit({"id": "py-2", "lease": "1h", "resources": {"cpu": "1"}})
        ids = [x.id for x in self.c.tasks(page=1)]  # one per page: the cursors are followed
        self.assertIn("py-1", ids)
        self.assertIn("py-2", ids)
        self.assertEqual(self.c.cancel("py-2").state, "cancelled")
        self.assertEqual(self.c.task("py-2").state, "cancelled")
        left = [x.id for x in self.c.tasks(state="pending,scheduled")]
        self.assertNotIn("py-2", left)

    def test_errors_carry_the_api_fields(self):
        with self.assertRaises(APIError) as e:
            self.c.submit({"resources": {"cpu": "lots"}})
        self.assertEqual(e.exception.status, 400)
        self.assertEqual(e.exception.code, "invalid_argument")
        self.assertEqual(e.exception.field, "resources.cpu")
        with self.assertRaises(APIError) as e:
            self.c.task("no-such-task")
        self.assertEqual(e.exception.code, "not_found")

    def test_lease(self):
        with self.c.lease(gpus=1, id="py-lease", wait="5s") as devices:
            self.assertEqual(len(devices), 1)
            self.assertEqual(devices[0].type, "nvidia.com/gpu")
            self.assertEqual(self.c.task("py-lease").state, "scheduled")
        done = self.c.wait("py-lease", timeout=10)
        self.assertEqual(done.state, "succeeded")
        self.assertEqual(done.exit_code, 0)
        with self.assertRaises(APIError) as e:  # more GPUs than there are: not placed, and cancelled
            with self.c.lease(gpus=8, id="py-big", wait="300ms"):
                self.fail("an impossible lease was placed")
        self.assertEqual(e.exception.code, "not_placed")
        self.assertEqual(self.c.task("py-big").state, "cancelled")

    def test_jobs(self):
        j = self.c.submit_job({"id": "py-job", "tasks": [{"id": "a", "lease": "1h", "resources": {"cpu": "1"}}]})
        self.assertEqual(j.id, "py-job")
        self.assertEqual([t.id for t in j.tasks], ["py-job.a"])
        self.assertEqual(self.c.cancel_job("py-job").state, "cancelled")
        with self.assertRaises(APIError) as e:
            self.c.cancel_job("py-job")
        self.assertEqual(e.exception.status, 409)

    def test_watch_and_logs(self):
        self.c.submit({"id": "py-watched", "lease": "1h", "resources": {"cpu": "1"}})
        seen = None
        for ev in self.c.watch(since=0, timeout=10):  # the stream stays open: stop at the event
            if ev.id == "py-watched":
                seen = ev
                break
        self.assertIsNotNone(seen, "no event of py-watched from the start of the stream")
        self.assertEqual(seen.kind, "task")
        with self.assertRaises(APIError) as e:  # a lease runs no command: it has no logs
            list(self.c.logs("py-watched"))
        self.assertEqual(e.exception.code, "invalid_argument")

    def test_history_and_usage(self):
        with self.c.lease(gpus=1, id="py-acct", user="ann", wait="5s") as devices:
            self.assertEqual(len(devices), 1)
        self.c.wait("py-acct", timeout=10)
        skipped = self.c.submit({"id": "py-after", "lease": "1h", "resources": {"cpu": "1"},
                                 "depends": ["afternotok:py-acct"]})
        self.assertEqual(skipped.state, "skipped")
        self.assertEqual(skipped.user, getpass.getuser())  # no token: the client names the local user
        recs = {r.id: r for r in self.c.history(since="1h", page=1)}
        self.assertEqual(recs["py-acct"].user, "ann")
        self.assertEqual(recs["py-acct"].state, "succeeded")
        self.assertEqual(recs["py-acct"].model, "L4")
        self.assertGreater(recs["py-acct"].device_hours["nvidia.com/gpu"], 0)
        self.assertEqual(recs["py-after"].state, "skipped")
        self.assertEqual([r.id for r in self.c.history(user="ann")], ["py-acct"])
        rep = self.c.usage(since="1h", by="user,model", user="ann")
        self.assertEqual(rep.by, ["user", "model"])
        self.assertEqual([(r.group, r.tasks) for r in rep.rows], [({"user": "ann", "model": "L4"}, 1)])
        self.assertGreater(rep.total.device_hours["nvidia.com/gpu"], 0)
        with self.assertRaises(APIError) as e:
            self.c.usage(by="colour")
        self.assertEqual(e.exception.field, "by")

    def test_cluster(self):
        cl = self.c.cluster()
        self.assertIn("nvidia.com/gpu", cl["resources"])


if __name__ == "__main__":
    unittest.main()
