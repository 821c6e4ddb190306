// libvirt's domain states map onto the engine's few.
#include "hypervisor/domainstate.h"

#include <QTest>

#include <libvirt/libvirt.h>

using namespace sandcastle;

class TestDomainState : public QObject {
    Q_OBJECT
private slots:
    void mapping_data() {
        QTest::addColumn<int>("vir");
        QTest::addColumn<int>("expected");
        QTest::newRow("nostate") << int(VIR_DOMAIN_NOSTATE) << int(DomainState::Unknown);
        QTest::newRow("running") << int(VIR_DOMAIN_RUNNING) << int(DomainState::Running);
        QTest::newRow("blocked") << int(VIR_DOMAIN_BLOCKED) << int(DomainState::Running);
        QTest::newRow("paused") << int(VIR_DOMAIN_PAUSED) << int(DomainState::Running);
        QTest::newRow("pmsuspended") << int(VIR_DOMAIN_PMSUSPENDED) << int(DomainState::Running);
        QTest::newRow("shutdown") << int(VIR_DOMAIN_SHUTDOWN) << int(DomainState::Stopping);
        QTest::newRow("shutoff") << int(VIR_DOMAIN_SHUTOFF) << int(DomainState::Stopped);
        QTest::newRow("crashed") << int(VIR_DOMAIN_CRASHED) << int(DomainState::Stopped);
        QTest::newRow("out of range") << 999 << int(DomainState::Unknown);
    }
    void mapping() {
        QFETCH(int, vir);
        QFETCH(int, expected);
        QCOMPARE(int(domainStateFromLibvirt(vir)), expected);
    }
    void names() {
        QCOMPARE(domainStateName(DomainState::Running), QStringLiteral("running"));
        QCOMPARE(domainStateName(DomainState::Stopped), QStringLiteral("stopped"));
        QCOMPARE(domainStateName(DomainState::Unknown), QStringLiteral("unknown"));
    }
};

QTEST_GUILESS_MAIN(TestDomainState)
#include "tst_domainstate.moc"
