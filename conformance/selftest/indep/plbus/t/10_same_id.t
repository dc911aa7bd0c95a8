use strict; use warnings;
use Test::More;
use FindBin; use lib "$FindBin::Bin/lib";
use BusTest;

# Equal ids from different clients (6.3.1): a response carries only its id and
# ids pass through unchanged, so a request whose id is pending from another
# client on its worker is held until that entry is gone.  'later' answers
# after params.ms without blocking the worker's next requests.

sub who { my ($c) = @_; my @m; while (defined(my $l = $c->read_line(0.3))) { push @m, jdec($l) } return [ map { [ $_->{id}, $_->{result}{params}{who} ] } @m ] }

sub same_id_two_clients {
    my ($first, $second, $name) = @_;
    my $bus = start_bus(config => write_config(instances => 1), mode => 'unix');
    my ($a, $b) = ($bus->connect, $bus->connect);
    $a->send({ %$first, method => 'later', params => { ms => 300, who => 'A' } });
    ok($bus->wait_log(qr/client#1\(.*: routed to worker 0/), "$name: A's request reached the worker");
    $b->send({ %$second, method => 'x', params => { who => 'B' } });
    ok($bus->wait_log(qr/INFO  .*client#2\(.*: request id=\S+ held: the id is pending from another client on /), "$name: B held");
    my $ma = $a->read_msg(5); my $mb = $b->read_msg(5);
    is_deeply([ $ma->{id}, $ma->{result}{params}{who} ], [ $first->{id}, 'A' ], "$name: A gets A's answer");
    is_deeply([ $mb->{id}, $mb->{result}{params}{who} ], [ $second->{id}, 'B' ], "$name: B gets B's answer");
    is_deeply(who($a), [], "$name: nothing else for A");
    is_deeply(who($b), [], "$name: nothing else for B");
    is($bus->count_log(qr/ WARN /), 0, "$name: no warning");
    is($bus->stop, 0, "$name: exit 0");
}

same_id_two_clients({ id => 1 }, { id => 1 }, 'number id');
same_id_two_clients({ id => '1' }, { id => '1' }, 'string id');
same_id_two_clients({ id => 1, sessionId => 'sa' }, { id => 1, sessionId => 'sb' }, 'two sessions');

# N workers each with id 7 pending from a different client: one more client
# without session waits for the first free worker.
for my $n (2, 3) {
    my $bus = start_bus(config => write_config(instances => $n), mode => 'unix');
    my @c = map { $bus->connect } 0 .. $n;
    for my $i (0 .. $n - 1) {
        $c[$i]->send({ id => 7, method => 'later', params => { ms => 300 + 100 * $i, who => $i } });
        my $k = $i + 1;
        ok($bus->wait_log(qr/client#$k\(.*: routed to worker $i\//), "n=$n: client $i on worker $i");
    }
    $c[$n]->send({ id => 7, method => 'x', params => { who => $n } });
    ok($bus->wait_log(qr/client#@{[$n + 1]}\(.*held: .* on every running worker/), "n=$n: last client held");
    for my $i (0 .. $n) {
        my $m = $c[$i]->read_msg(5);
        is_deeply([ $m->{id}, $m->{result}{params}{who} ], [ 7, $i ], "n=$n: client $i gets its own answer");
    }
    select undef, undef, undef, 0.2 + 0.1 * $n;
    is_deeply(who($_), [], "n=$n: nothing else") for @c;
    is($bus->stop, 0, "n=$n: exit 0");
}

# A client leaves while its id 5 is pending; a newcomer sends id 5 (answered
# later than the departed one would be): the late answer is discarded, the
# newcomer gets its own.
{
    my $bus = start_bus(config => write_config(instances => 1), mode => 'unix');
    for my $how ('malformed', 'close') {
        my $a = $bus->connect;
        $a->send({ id => 5, method => 'later', params => { ms => 400, who => 'departed' } });
        ok($bus->wait_log(qr/routed to worker 0.*"departed"/), "$how: request reached the worker") if $how eq 'malformed';
        select undef, undef, undef, 0.1;
        if ($how eq 'malformed') { $a->send('{bad'); ok($a->is_closed, "$how: closed by the daemon") }
        else { $a->close }
        my $n = $bus->connect;
        $n->send({ id => 5, method => 'later', params => { ms => 600, who => 'newcomer' } });
        my $m = $n->read_msg(5);
        is_deeply([ $m->{id}, $m->{result}{params}{who} ], [ 5, 'newcomer' ], "$how: newcomer gets its own answer");
        is_deeply(who($n), [], "$how: nothing else");
        $n->close;
    }
    is($bus->count_log(qr/WARN .*response id=5 for client#\d+\(.*, which has disconnected, discarded/), 2, 'late answers discarded with a warning');
    is($bus->stop, 0, 'exit 0');
}

# A held client that disconnects is cleaned up; the next one is not blocked.
{
    my $bus = start_bus(config => write_config(instances => 1), mode => 'unix');
    my ($a, $b) = ($bus->connect, $bus->connect);
    $a->send({ id => 1, method => 'later', params => { ms => 400, who => 'A' } });
    ok($bus->wait_log(qr/client#1\(.*: routed to worker 0/), 'A routed');
    $b->send({ id => 1, method => 'x', params => { who => 'B' } });
    ok($bus->wait_log(qr/client#2\(.*held/), 'B held');
    $b->close;
    ok($bus->wait_log(qr/client#2\(.*closing connection: client closed the connection/), 'held client cleaned up');
    my $ma = $a->read_msg(5);
    is($ma->{result}{params}{who}, 'A', "A gets A's answer");
    my $c = $bus->connect;
    $c->send({ id => 1, method => 'x', params => { who => 'C' } });
    is($c->read_msg(5)->{result}{params}{who}, 'C', 'a newcomer with the same id is served');
    is_deeply(who($a), [], 'nothing else for A');
    is($bus->stop, 0, 'exit 0');
}

done_testing;
