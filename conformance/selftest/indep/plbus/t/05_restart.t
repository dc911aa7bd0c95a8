use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;
use Time::HiRes qw(sleep);

sub spawn_times {
    my ($log) = @_;
    my @t;
    while ($log =~ /T(\d\d):(\d\d):(\d\d\.\d+)Z INFO  plbus\[\d+\] worker 0\/\w+\(pid=\d+\): spawned/g) { push @t, $1 * 3600 + $2 * 60 + $3 }
    return @t;
}

{   # crash loop: exponential backoff, then give up after max_restarts
    my $cfg = write_config(pools => [ { id => 'boom', command => worker_cmd(), args => ['--crash-at-start'], instances => 1 } ],
                           limits => { max_restarts => 4, restart_window_sec => 60 });
    my $bus = start_bus(config => $cfg, mode => 'unix');
    ok($bus->wait_log(qr/ERROR .*max_restarts \(4\) reached within 60s; worker will not be restarted/, 10), 'gave up after max_restarts');
    my @t = spawn_times($bus->log_text);
    is(scalar @t, 5, 'initial spawn + 4 restarts');
    my @gap = map { $t[$_] - $t[$_ - 1] } 1 .. $#t;
    for my $i (0 .. $#gap) { cmp_ok($gap[$i], '>=', 0.1 * 2**$i - 0.002, "restart gap $i >= backoff delay") }
    for my $i (1 .. $#gap) { cmp_ok($gap[$i], '>', $gap[$i - 1], "backoff grows (gap $i: $gap[$i-1] -> $gap[$i])") }
    like($bus->log_text, qr/scheduled in 0\.100s.*\n(?:.*\n)*.*scheduled in 0\.200s.*\n(?:.*\n)*.*scheduled in 0\.400s.*\n(?:.*\n)*.*scheduled in 0\.800s/, 'delays 0.1, 0.2, 0.4, 0.8');
    like($bus->log_text, qr/exited with code 3/, 'exit code logged');
    # with no worker, messages are dropped with a warning but the client stays connected
    my $c = $bus->connect;
    $c->send({ id => 1, method => 'x' });
    ok($bus->wait_log(qr/no running worker available; message dropped/), 'dropped with warning');
    ok(!$c->is_closed(0.3), 'client still connected');
    is($bus->stop, 0, 'exit 0');
}
{   # crash during a request: pending discarded, worker restarted and serving again
    my $cfg = write_config(instances => 1);
    my $bus = start_bus(config => $cfg, mode => 'unix');
    my $c = $bus->connect;
    $c->send({ id => 1, method => 'x' });
    my $pid = $c->read_msg->{result}{pid};
    $c->send({ id => 2, method => 'crash', sessionId => 'cs' });
    ok($bus->wait_log(qr/WARN .*worker 0\/echo\(pid=$pid\): exited with code 1/), 'unexpected exit logged as WARN');
    ok($bus->wait_log(qr/discarding pending request id=2 from client/), 'pending discarded');
    ok($bus->wait_log(qr/1 session\(s\) invalidated \(worker exited\)/), 'session invalidated');
    ok($bus->wait_log(qr/restart 1\/5/), 'restart scheduled');
    ok(!defined $c->read_line(0.3), 'no response for discarded request');
    ok(wait_until(sub { $bus->count_log(qr/spawned/) >= 2 }), 'respawned');
    $c->send({ id => 3, method => 'x', sessionId => 'cs' });
    my $m = $c->read_msg;
    isnt($m->{result}{pid}, $pid, 'new worker process serves');
    # reply then exit: reply delivered
    $c->send({ id => 4, method => 'reply_then_exit' });
    is($c->read_msg->{id}, 4, 'response written just before exit delivered');
    ok(wait_until(sub { $bus->count_log(qr/spawned/) >= 3 }), 'exit code 0 also restarted');
    # worker closes stdout but keeps running: terminated and restarted
    $c->send({ id => 5, method => 'closeout' });
    ok($bus->wait_log(qr/worker closed its stdout but did not exit; terminating worker/), 'stdout EOF detected');
    ok(wait_until(sub { $bus->count_log(qr/spawned/) >= 4 }, 5), 'restarted after stdout close');
    $c->send({ id => 6, method => 'x' });
    is($c->read_msg->{id}, 6, 'served again');
    is($bus->stop, 0, 'exit 0');
}
{   # max_restarts 0: never restart
    my $cfg = write_config(instances => 1, limits => { max_restarts => 0 });
    my $bus = start_bus(config => $cfg, mode => 'unix');
    my $c = $bus->connect;
    $c->send({ id => 1, method => 'crash' });
    ok($bus->wait_log(qr/max_restarts \(0\) reached/), 'max_restarts 0: no restart');
    is($bus->count_log(qr/spawned/), 1, 'only initial spawn');
    is($bus->stop, 0, 'exit 0');
}
{   # sliding window: restarts older than restart_window_sec do not count
    my $cfg = write_config(instances => 1, limits => { max_restarts => 1, restart_window_sec => 0.6 });
    my $bus = start_bus(config => $cfg, mode => 'unix');
    my $c = $bus->connect;
    $c->send({ id => 1, method => 'crash' });
    ok(wait_until(sub { $bus->count_log(qr/spawned/) >= 2 }), 'first restart');
    sleep 0.8;
    $c->send({ id => 2, method => 'crash' });
    ok(wait_until(sub { $bus->count_log(qr/spawned/) >= 3 }), 'restart allowed again after window');
    like($bus->log_text, qr/restart 1\/1 in window scheduled in 0\.100s(?:.*\n)*.*restart 1\/1 in window scheduled in 0\.100s/, 'backoff reset after window');
    $c->send({ id => 3, method => 'crash' });
    ok($bus->wait_log(qr/max_restarts \(1\) reached within 0.6s/), 'second crash inside window: give up');
    is($bus->stop, 0, 'exit 0');
}
{   # other workers keep serving while one restarts
    my $cfg = write_config(instances => 3);
    my $bus = start_bus(config => $cfg, mode => 'unix');
    my $c = $bus->connect;
    $c->send({ id => 'c', method => 'crash' });
    ok($bus->wait_log(qr/exited with code 1/), 'one crashed');
    $c->send(map { { id => $_, method => 'x' } } 1 .. 10);
    is(scalar($c->read_msgs(10)), 10, 'all requests answered by remaining/restarted workers');
    is($bus->stop, 0, 'exit 0');
}
done_testing;
